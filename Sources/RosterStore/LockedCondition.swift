internal import Foundation

/// State behind a condition variable: threads that wait for work sleep on it, and whoever
/// changes the state signals them. For the store's own threads only (lanes, the priority
/// handoff); tasks use `Mutex`.
///
/// `@unchecked Sendable`: every access to `state` holds `condition`'s lock.
final class LockedCondition<State>: @unchecked Sendable {
  private let condition = NSCondition()
  private var state: State

  init(_ state: State) {
    self.state = state
  }

  func withLock<T>(_ body: (inout State) -> T) -> T {
    self.condition.lock()
    defer { self.condition.unlock() }
    return body(&self.state)
  }

  /// Sleeps until signalled or `date`; false on time-out. Inside `withLock` only.
  func wait(until date: Date) -> Bool { self.condition.wait(until: date) }

  /// Wakes one waiter. Inside `withLock` only.
  func signal() { self.condition.signal() }
}
