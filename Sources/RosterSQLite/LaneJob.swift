internal import Foundation
internal import RosterDomain
internal import RosterLocks
internal import Synchronization

/// One piece of store work in a lane: its body, its caller's control, and why it stopped.
///
/// `@unchecked Sendable`: `phase` is behind its mutex and `cancelled` atomic; every `var` is
/// written by the lane thread as the job begins and runs, and read on that thread (by the
/// progress handler) or once the body has run.
final class LaneJob: @unchecked Sendable {
  /// Why a job was stopped before it finished.
  enum StopReason: Sendable {
    case cancelled
    case deadline
    case budget
  }

  /// Runs the body and returns how to answer the caller; nil when the body answered by itself.
  typealias Work = @Sendable (LaneJob) -> (@Sendable () -> Void)?

  private enum Phase {
    case new
    case queued(work: Work, fail: @Sendable (any Error) -> Void)
    case running(work: Work)
    case done
  }

  let control: CallControl?
  let enqueued = ContinuousClock.now
  /// When the caller stops waiting for an answer, if it said: the call's deadline.
  let deadline: ContinuousClock.Instant?
  /// Jobs waiting ahead of this one when it was queued with no thread free; nil when a thread
  /// was (`StoreLane`'s estimate of a new job's wait learns from the others).
  var ahead: Int?
  private let lane: StoreLane?
  private let phase = Locked<Phase>(.new)
  private let cancelled = Atomic<Bool>(false)
  private var runDeadline: ContinuousClock.Instant?
  /// Whether the job gives up the CPU now and then as it runs: a background lane's
  /// (`SCHED_IDLE`), whose threads otherwise could keep a waking event loop or interactive
  /// read waiting milliseconds for a CPU (docs/performance.md, "Robust under load").
  private let yields: Bool
  /// When the job next gives up the CPU (`progress()`); read and written on its thread only.
  private var nextYield = ContinuousClock.now
  /// Times it did, read once it has run.
  private(set) var yieldCount = 0
  private var budgetEnds: ContinuousClock.Instant?
  private(set) var waited: Int64 = 0
  /// Set when the job was stopped: read after the body returns or throws.
  private(set) var stopReason: StopReason?

  init(control: CallControl?, deadline: ContinuousClock.Instant? = nil, lane: StoreLane?) {
    self.control = control
    self.deadline = deadline ?? control?.deadline
    self.lane = lane
    self.yields = lane?.configuration.isBackground ?? false
  }

  func prepare(
    work: @escaping Work,
    fail: @escaping @Sendable (any Error) -> Void
  ) {
    self.phase.withLock { $0 = .queued(work: work, fail: fail) }
  }

  /// Fails a job that never ran.
  func fail(_ error: any Error) {
    let fail: (@Sendable (any Error) -> Void)? = self.phase.withLock { phase in
      guard case .queued(_, let fail) = phase else { return nil }
      phase = .done
      return fail
    }
    fail?(error)
  }

  /// Cancels the job: a waiting one fails at once, a running one stops at its next
  /// progress check.
  func cancel() {
    self.cancelled.store(true, ordering: .relaxed)
    let fail: (@Sendable (any Error) -> Void)? = self.phase.withLock { phase in
      guard case .queued(_, let fail) = phase else { return nil }
      phase = .done
      return fail
    }
    guard let fail else { return }
    self.lane?.remove(self)
    fail(CallControl.stopError(self.control))
  }

  /// Marks the job running; false when it was cancelled while it waited, or its call ended.
  func begin(budget: Duration?) -> Bool {
    let now = ContinuousClock.now
    self.waited = (now - self.enqueued).nanoseconds
    let work: Work? = self.phase.withLock { phase in
      guard case .queued(let work, _) = phase else { return nil }
      phase = .running(work: work)
      return work
    }
    guard work != nil else { return false }
    self.budgetEnds = budget.map { now + $0 }
    self.runDeadline = [self.control?.deadline, self.budgetEnds].compactMap { $0 }.min()
    return true
  }

  func runWork() -> (@Sendable () -> Void)? {
    let work: Work? = self.phase.withLock { phase in
      guard case .running(let work) = phase else { return nil }
      phase = .done
      return work
    }
    return work?(self)
  }

  /// What SQLite's progress handler asks: whether to stop. A background lane's job also gives
  /// up the CPU to whichever thread waits for it, at most every `yieldInterval`.
  func progress() -> Bool {
    if self.yields {
      let now = ContinuousClock.now
      if now >= self.nextYield {
        sched_yield()
        self.yieldCount += 1
        self.nextYield = now + Self.yieldInterval
      }
    }
    return self.shouldStop
  }

  /// How often a background lane's job gives up the CPU.
  static let yieldInterval: Duration = .microseconds(50)

  /// Whether the body should stop now. Cheap: an atomic load and, when there is a deadline,
  /// one read of the monotonic clock. Records why.
  var shouldStop: Bool {
    if self.cancelled.load(ordering: .relaxed) || self.control?.isCancelled == true {
      self.stopReason = self.control?.deadlineHasPassed == true ? .deadline : .cancelled
      return true
    }
    if let deadline = self.runDeadline, ContinuousClock.now >= deadline {
      self.stopReason = self.budgetEnds == deadline ? .budget : .deadline
      return true
    }
    return false
  }

  /// What the job's caller is told when it stopped; nil while it has not.
  var stopError: StoreError? {
    switch self.stopReason {
    case .cancelled: StoreError.callCancelled
    case .deadline: StoreError.deadlinePassed
    case .budget: StoreError.budgetSpent
    case nil: nil
    }
  }

  /// Runs `body`; if the job was stopped, turns whatever it threw into the reason's error.
  func translating<T>(_ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch {
      throw self.stopError ?? error
    }
  }
}
