internal import Foundation
internal import RosterDomain

/// State behind a condition variable: threads that wait for work sleep on it, and whoever
/// changes the state signals them. For the store's own threads only (lanes, the priority
/// handoff); tasks use `Locked`.
///
/// `@unchecked Sendable`: every access to `state` holds `condition`'s lock.
final class LockedCondition<State>: @unchecked Sendable {
  private let condition = NSCondition()
  private var state: State

  init(_ state: State) {
    self.state = state
  }

  /// Runs `body` with the lock held. `body` must not wait: a wait releases the lock while an
  /// `inout` access to the state is open, and other threads' changes would be lost.
  func withLock<T>(_ body: (inout State) -> T) -> T {
    self.condition.lock()
    defer { self.condition.unlock() }
    return body(&self.state)
  }

  /// Waits until `ready` holds or `deadline` passes, then runs `body` with the lock held;
  /// `body`'s flag says whether `ready` held. Each check reads the state afresh, so changes
  /// made while this thread slept are seen.
  func wait<T>(
    until deadline: Date,
    for ready: (State) -> Bool,
    beforeSleeping: (inout State) -> Void = { _ in },
    afterSleeping: (inout State) -> Void = { _ in },
    then body: (inout State, Bool) -> T
  ) -> T {
    self.condition.lock()
    defer { self.condition.unlock() }
    while !ready(self.state) {
      beforeSleeping(&self.state)
      let signalled = self.condition.wait(until: deadline)
      afterSleeping(&self.state)
      if !signalled { break }
    }
    return body(&self.state, ready(self.state))
  }

  /// Wakes one waiter, after a change made in `withLock`; best called once the lock is
  /// released, so the woken thread does not block on it at once.
  func signal() { self.condition.signal() }
}
