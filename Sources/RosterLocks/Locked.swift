internal import CThreadShim
public import Synchronization

/// A value behind a lock: Synchronization's `Mutex`, whose acquires and releases are also told
/// to ThreadSanitizer.
///
/// TSan does not see the standard library's `Mutex` on Linux (it locks with atomics and futexes
/// in code TSan does not instrument: `Tests/Sanitizers/mutex-under-tsan.swift`), so under
/// `scripts/sanitize thread` every access a `Mutex` guards was reported as a race, and a real
/// race could not be told from them. `CThreadShim`'s annotations tell TSan of each acquire and
/// release in a build with TSan, and do nothing in the others.
public struct Locked<Value: ~Copyable>: ~Copyable, Sendable {
  @usableFromInline let mutex: Mutex<Value>

  @inlinable
  public init(_ value: consuming sending Value) {
    self.mutex = Mutex(value)
  }

  /// Runs `body` with the value, holding the lock.
  @inlinable
  public borrowing func withLock<Result: ~Copyable, E: Error>(
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    try self.mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
      let lock = withUnsafePointer(to: self.mutex) { UnsafeRawPointer($0) }
      lockAcquired(lock)
      defer { lockReleasing(lock) }
      return try body(&value)
    }
  }
}

@usableFromInline
func lockAcquired(_ lock: UnsafeRawPointer) {
  roster_lock_acquired(lock)
}

@usableFromInline
func lockReleasing(_ lock: UnsafeRawPointer) {
  roster_lock_releasing(lock)
}
