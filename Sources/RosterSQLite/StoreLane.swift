internal import CThreadShim
internal import CoreMetrics
internal import Foundation
internal import RosterDomain
internal import Synchronization

/// How one lane of store threads runs: how many jobs at once, how many may wait, at what
/// priority, and how long one job may run.
public struct LaneConfiguration: Sendable, Hashable {
  /// Jobs running at once, each on a thread of the lane's own.
  public var width: Int
  /// Jobs waiting for a thread; one more is refused with `resourceExhausted` at once.
  public var queueLimit: Int
  /// The lane's threads' nice value (Linux): 0 for interactive work, higher so heavy work
  /// yields the CPU to whatever else wants it, the server's QoS; 19 also puts the threads in
  /// the SCHED_IDLE class, and has their jobs give up the CPU every `LaneJob.yieldInterval`
  /// as they run (a thread that woke beside them could wait for a CPU: `LaneJob.progress`).
  public var niceness: Int32
  /// Whether the threads run in the background class (SCHED_IDLE): at niceness 19, as
  /// `roster_thread_setup` puts them.
  var isBackground: Bool { self.niceness >= 19 }
  /// The longest one job may run before it is interrupted, whatever its caller's deadline;
  /// nil for no bound.
  public var budget: Duration?
  /// How long the lane counts as overloaded after it refused a job for its wait.
  var overloadInterval: Duration = .seconds(1)

  /// Creates a lane configuration.
  public init(width: Int, queueLimit: Int, niceness: Int32 = 0, budget: Duration? = nil) {
    self.width = width
    self.queueLimit = queueLimit
    self.niceness = niceness
    self.budget = budget
  }
}

/// A lane's counters, for tests and diagnostics.
public struct LaneStatistics: Sendable, Hashable {
  /// Jobs running now.
  public var running = 0
  /// Jobs waiting now.
  public var queued = 0
  /// Threads the lane has now (idle ones exit after a few seconds).
  public var threads = 0
  /// Threads waiting for a job now.
  public var idle = 0
  /// Jobs finished, successfully or not.
  public var completed = 0
  /// Jobs refused because the queue was full.
  public var rejected = 0
  /// Jobs stopped by their call's cancellation, deadline or the lane's budget.
  public var interrupted = 0
  /// Times the lane's jobs gave up the CPU as they ran (a background lane's).
  public var yields = 0
}

/// A set of threads the store owns, with a bounded queue, for one kind of work.
///
/// Store work whose cost grows with the data must never run on the cooperative pool (two
/// threads on this machine) or an event loop: it would hold up every other call, health
/// checks included. The store has two lanes: one for cheap interactive reads and one, in the
/// background scheduling class, for heavy work (searches, aggregates, imports). Each job's statement is
/// stopped when its call is cancelled, its deadline passes or the lane's budget runs out
/// (see `LaneJob.shouldStop`, polled by SQLite's progress handler).
///
/// Threads start when work arrives and exit after `idleTimeout` without work, so an idle
/// store holds none.
final class StoreLane: Sendable {
  let name: String
  let configuration: LaneConfiguration
  private let core = LockedCondition(State())
  private let metrics: Metrics
  /// Answers the callers of a lane below the usual priority (see `ThreadPriority`).
  private let handoff: SerialThread?

  init(name: String, configuration: LaneConfiguration) {
    self.name = name
    self.configuration = configuration
    self.metrics = Metrics(lane: name)
    self.handoff = configuration.niceness > 0 ? SerialThread.answers : nil
  }

  /// Runs `body` on one of the lane's threads and returns its result.
  ///
  /// - Throws: `resourceExhausted` at once when the queue is full; `cancelled` or
  ///   `deadlineExceeded` when the call ends before or while the job runs; else what
  ///   `body` throws.
  func run<T: Sendable>(_ body: @escaping @Sendable (LaneJob) throws -> T) async throws -> T {
    let control = CallControl.current
    try CallControl.check(control)
    let job = LaneJob(control: control, lane: self)
    let hook = control?.addCancellationHook { job.cancel() }
    defer { control?.removeCancellationHook(hook) }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<T, any Error>) in
        job.prepare(
          work: { job in
            let result = Result { try job.translating { try body(job) } }
            return { continuation.resume(with: result) }
          },
          fail: { continuation.resume(throwing: $0) }
        )
        self.enqueue(job)
      }
    } onCancel: {
      job.cancel()
    }
  }

  /// Runs `call` on one of the lane's threads, with no caller waiting for it (a point call that
  /// answers by itself: `SQLiteStore.runPointCall`); `stopped` runs instead when the queue is
  /// full, `deadline` would pass before a thread is free, or the job is cancelled while it
  /// waits. The job, to cancel.
  func submit(
    deadline: ContinuousClock.Instant?,
    _ call: @escaping @Sendable (LaneJob) -> Void,
    stopped: @escaping @Sendable (any Error) -> Void
  ) -> LaneJob {
    let job = LaneJob(control: nil, deadline: deadline, lane: self)
    job.prepare(
      work: { job in
        call(job)
        return nil
      },
      fail: stopped
    )
    self.enqueue(job)
    return job
  }

  /// The lane's counters now.
  var statistics: LaneStatistics {
    self.core.withLock { state in
      var statistics = state.statistics
      statistics.queued = state.queue.count
      statistics.threads = state.threads
      statistics.idle = state.idle
      return statistics
    }
  }

  private func enqueue(_ job: LaneJob) {
    let admission: Admission = self.core.withLock { state in
      guard let ahead = state.ahead(width: self.configuration.width) else {
        state.admission.foundThreadFree()
        return state.admit(job, lane: self)
      }
      guard state.queue.count < self.configuration.queueLimit else {
        state.statistics.rejected += 1
        return .full
      }
      if let wait = state.admission.refusalWait(
        ahead: ahead,
        deadline: job.deadline,
        interval: self.configuration.overloadInterval,
        atDoor: false
      ) {
        state.statistics.rejected += 1
        return .late(wait)
      }
      job.ahead = ahead
      return state.admit(job, lane: self)
    }
    // Woken after the lock is released: a thread woken while it is held (on a busy or pinned
    // CPU, at once) would block on the lock at its first step and switch back (futex waits in
    // a profile of GetEmployee under load).
    switch admission {
    case .queued: ()
    case .wake: self.core.signal()
    case .start: self.startThread()
    case .full:
      self.refuse(
        job,
        "the server is busy with \(self.configuration.width) \(self.name) calls and "
          + "\(self.configuration.queueLimit) waiting; retry later"
      )
    case .late(let wait):
      self.refuse(job, Self.lateMessage(wait, lane: self.name))
    }
  }

  /// The refusal a job due by `deadline` would get if it were offered now for its wait
  /// (`LaneAdmission.refusalWait`), counted as one; nil when it would not. For a caller that
  /// has not made the job yet and need not, when it is refused.
  func refusal(dueBy deadline: ContinuousClock.Instant) -> StoreError? {
    let wait: Duration? = self.core.withLock { state in
      guard let ahead = state.ahead(width: self.configuration.width, coming: true),
        let wait = state.admission.refusalWait(
          ahead: ahead,
          deadline: deadline,
          interval: self.configuration.overloadInterval,
          atDoor: true
        )
      else {
        state.admission.coming += 1
        return nil
      }
      state.statistics.rejected += 1
      return wait
    }
    guard let wait else { return nil }
    self.metrics.rejected.increment()
    return StoreError(.resourceExhausted, Self.lateMessage(wait, lane: self.name))
  }

  /// Ends the lane's overload now, as its `overloadInterval` passing with no refusal would:
  /// for tests of what the lane does after it, which could not wait for the clock without
  /// racing it (`LaneAdmission.refusalWait` is tested with instants of its own).
  func endOverload() { self.core.withLock { $0.admission.overloadedUntil = nil } }

  private static func lateMessage(_ wait: Duration, lane: String) -> String {
    "the server is overloaded: \(lane) calls wait about \(wait.nanoseconds / 1_000_000) ms "
      + "for a thread; retry later"
  }

  /// Refuses a job at once, with `resourceExhausted`: its caller may retry, or go elsewhere.
  private func refuse(_ job: LaneJob, _ message: String) {
    self.metrics.rejected.increment()
    job.fail(StoreError(.resourceExhausted, message))
  }

  /// Removes a job that was cancelled while it waited.
  func remove(_ job: LaneJob) {
    self.core.withLock { state in
      state.queue.removeAll { $0 === job }
      self.metrics.depth.record(state.queue.count)
    }
  }

  private func startThread() {
    let thread = Thread { [self] in
      _ = roster_thread_setup("roster.\(self.name)", self.configuration.niceness)
      if self.configuration.niceness == 0 {
        // An event loop that queues a point read goes on with its turn, queueing the turn's
        // other reads, instead of giving the CPU to the thread it woke at each one: the lane
        // then takes them back to back: more calls per second at less CPU each
        // (docs/performance.md, "Event loops and a slow disk").
        _ = roster_thread_use_batch_policy()
      }
      self.work()
    }
    thread.start()
  }

  private func work() {
    // Whether this thread runs at `overloadedNiceness`, since it found the lane overloaded.
    var lowered = false
    while let job = self.next() {
      guard job.begin(budget: self.configuration.budget) else {
        // Cancelled while it waited: nothing ran.
        self.core.withLock { $0.statistics.running -= 1 }
        continue
      }
      self.metrics.wait.recordNanoseconds(job.waited)
      let answer = job.runWork()
      let interrupted = job.stopReason != nil
      if interrupted { self.metrics.interrupted.increment() }
      let overloaded = self.core.withLock { state in
        state.statistics.running -= 1
        state.statistics.completed += 1
        state.statistics.yields += job.yieldCount
        if interrupted { state.statistics.interrupted += 1 }
        return state.admission.isOverloaded()
      }
      // Answered after the counters, so a caller that sees its answer sees them too; from a
      // thread at the usual priority when this one is lower (a point call answered itself,
      // through its event loop).
      if let answer {
        if let handoff = self.handoff ?? (lowered ? SerialThread.answers : nil) {
          handoff.run(answer)
        } else {
          answer()
        }
      }
      if overloaded, !lowered, self.configuration.niceness < Self.overloadedNiceness {
        lowered = ThreadPriority.set(Self.overloadedNiceness)
        _ = roster_thread_use_batch_policy()
      } else if lowered, !overloaded {
        self.retire()
        return
      }
    }
  }

  /// Ends the calling thread, which lowered its priority while the lane was overloaded and
  /// may not raise it again (`ThreadPriority`). When jobs wait, a new thread takes its place,
  /// started by `SerialThread.answers`, at the usual priority (a thread inherits its
  /// creator's); otherwise the next job starts one.
  private func retire() {
    let replace = self.core.withLock { state in
      guard !state.queue.isEmpty else {
        state.threads -= 1
        return false
      }
      return true
    }
    if replace { SerialThread.answers.run { self.startThread() } }
  }

  /// The next job, waiting for one; nil when the thread should exit (idle too long).
  private func next() -> LaneJob? {
    self.core.wait(
      until: Date(timeIntervalSinceNow: Self.idleTimeout),
      for: { !$0.queue.isEmpty },
      beforeSleeping: { state in
        state.idle += 1
        state.admission.coming = 0
      },
      afterSleeping: { $0.idle -= 1 }
    ) { state, ready in
      guard ready else {
        state.threads -= 1
        return nil
      }
      let job = state.queue.removeFirst()
      state.admission.took(job)
      state.statistics.running += 1
      self.metrics.depth.record(state.queue.count)
      return job
    }
  }

  /// The calling thread's nice value, for tests and diagnostics.
  static func currentNiceness() -> Int32 { ThreadPriority.current }

  /// The calling thread's name, for tests and diagnostics.
  static func currentThreadName() -> String {
    var buffer = [CChar](repeating: 0, count: 32)
    roster_thread_name(&buffer, Int32(buffer.count))
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// How long a thread with nothing to do stays.
  static let idleTimeout: TimeInterval = 5

  /// The nice value of a lane's threads while it is overloaded, when theirs is lower: an event
  /// loop that shares a CPU with them then gets three times their share of it, reads requests
  /// as they come and refuses at once those the lane cannot take, rather than leaving them in
  /// its sockets to age past their deadlines. Only then: at rest, a lane below the loops'
  /// priority answers fewer calls a second (docs/performance.md, "Proven against what nobody
  /// planned for", its overload paragraph).
  static let overloadedNiceness: Int32 = 5

  /// What becomes of a job offered to the lane.
  private enum Admission {
    case queued, wake, start, full
    case late(Duration)
  }

  /// The queue and counters, under the condition variable the idle threads wait on.
  private struct State {
    var queue: [LaneJob] = []
    var threads = 0
    var idle = 0
    var statistics = LaneStatistics()
    /// The lane's estimate of a new job's wait, and whether it is overloaded.
    var admission = LaneAdmission()

    /// Queues `job`; whether a thread must be woken or started for it.
    fileprivate mutating func admit(_ job: LaneJob, lane: StoreLane) -> Admission {
      self.admission.coming = max(0, self.admission.coming - 1)
      self.queue.append(job)
      lane.metrics.depth.record(self.queue.count)
      if self.queue.count > self.idle && self.threads < lane.configuration.width {
        self.threads += 1
        return .start
      }
      return self.idle > 0 ? .wake : .queued
    }

    /// The jobs a job queued now would wait for, the lane's `width` threads all busy; nil when
    /// a thread is free for it or one starts. `coming`: counting the calls let in at the door
    /// whose jobs are on their way.
    func ahead(width: Int, coming: Bool = false) -> Int? {
      let queued = self.queue.count + (coming ? self.admission.coming : 0)
      guard self.threads >= width, queued >= self.idle else { return nil }
      return queued - self.idle
    }
  }

  private struct Metrics: Sendable {
    let depth: Recorder
    let wait: CoreMetrics.Timer
    let rejected: Counter
    let interrupted: Counter

    init(lane: String) {
      let dimensions = [("lane", lane)]
      self.depth = Recorder(
        label: "roster_lane_queue_depth",
        dimensions: dimensions,
        aggregate: false
      )
      self.wait = CoreMetrics.Timer(label: "roster_lane_wait_seconds", dimensions: dimensions)
      self.rejected = Counter(label: "roster_lane_rejected_total", dimensions: dimensions)
      self.interrupted = Counter(label: "roster_lane_interrupted_total", dimensions: dimensions)
    }
  }
}
