internal import Foundation

/// What a lane knows to refuse a job for its wait, kept under the lane's lock: how long a
/// waiting job waits for each job ahead of it, learned from the jobs that waited; until when
/// the lane is overloaded; and the calls let in at its door whose jobs are on their way.
struct LaneAdmission {
  /// How long, in nanoseconds, a waiting job waits for each job ahead of it: an average over
  /// the jobs that waited, weighted to the recent ones (`took`).
  var waitPerJobAhead: Double = 0
  /// When a job that waited last taught `waitPerJobAhead`.
  var taught: ContinuousClock.Instant?
  /// Until when the lane counts as overloaded (`refusalWait`).
  var overloadedUntil: ContinuousClock.Instant?
  /// Calls let in at the door (`StoreLane.refusal(dueBy:)`) whose jobs have not reached the
  /// queue, as far as the lane can tell: each job queued takes one off, and a thread with
  /// nothing to do clears them (a call let in may bring no job here). Without them, the calls
  /// of one read would all be let in on the queue they found.
  var coming = 0

  /// The longest wait a job may expect to be let in at the door while the lane is overloaded
  /// (four times as long in the queue).
  static let overloadedWait: Duration = .milliseconds(4)

  /// Whether the lane is overloaded at `now`.
  func isOverloaded(at now: ContinuousClock.Instant = .now) -> Bool {
    self.overloadedUntil.map { now < $0 } ?? false
  }

  /// How long a job queued now would wait, `ahead` jobs to be taken before it, when that is
  /// too long to queue it: longer than the time left before its `deadline`, or, while the
  /// lane is overloaded, than four times `overloadedWait`. A refusal means calls arrive faster
  /// than the lane ends them, and the lane stays overloaded until `interval` passes with no
  /// refusal: the queue then stays short, and the calls admitted answer soon. Only a deadline
  /// makes the lane overloaded: without one, a client whose own concurrency bounds the queue
  /// (a closed loop, however deep) is refused only past the lane's `queueLimit`.
  ///
  /// `atDoor`: asked before the call has spent anything (`StoreLane.refusal(dueBy:)`), on the
  /// thread that read it; then the bounds are tighter: half the time left (the other half is
  /// for the run, the answer's way back and the estimate's error), and `overloadedWait`
  /// itself. The calls one read lets in reach the queue together, after the door counted
  /// them; the looser bounds in the queue keep them from being refused behind each other once
  /// their tasks and handlers are spent.
  mutating func refusalWait(
    ahead: Int,
    deadline: ContinuousClock.Instant?,
    interval: Duration,
    atDoor: Bool,
    now: ContinuousClock.Instant = .now
  ) -> Duration? {
    let wait = Duration.nanoseconds(Int64(Double(ahead + 1) * self.waitPerJobAhead))
    guard
      self.isOverloaded(at: now) && wait > Self.overloadedWait * (atDoor ? 1 : 4)
        || deadline.map({ now + wait * (atDoor ? 2 : 1) > $0 }) ?? false
    else { return nil }
    self.overloadedUntil = now + interval
    return wait
  }

  /// Learns from a job that found a thread free (or one starting), once no job has waited for
  /// `unlearnAfter`, that the lane keeps up: the estimate moves toward no wait as a waiting
  /// job's sample moves it (`took`). Only jobs that wait teach a wait, so without this a wait
  /// learned once (a pause of the whole process, a burst long past) would stand while every job
  /// offered is refused for it and none waits. While jobs still wait, their samples alone make
  /// the estimate, as free threads between them say nothing of how long a queued job waits.
  mutating func foundThreadFree() {
    guard self.waitPerJobAhead > 0, let taught = self.taught,
      ContinuousClock.now - taught > Self.unlearnAfter
    else { return }
    self.waitPerJobAhead -= self.waitPerJobAhead / 8
    // Under a microsecond, nothing: the clock is not read for it again.
    if self.waitPerJobAhead < 1_000 { self.waitPerJobAhead = 0 }
  }

  /// How long after the last job that waited (`taught`) free threads unlearn the wait.
  static let unlearnAfter: Duration = .milliseconds(100)

  /// Learns from a job just taken how long each job ahead of a waiting one holds it up.
  mutating func took(_ job: LaneJob) {
    guard let ahead = job.ahead else { return }
    let now = ContinuousClock.now
    let sample = Double((now - job.enqueued).nanoseconds) / Double(ahead + 1)
    self.waitPerJobAhead += (sample - self.waitPerJobAhead) / 8
    self.taught = now
  }
}
