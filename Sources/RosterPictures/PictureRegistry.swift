internal import RosterLocks

/// The etags whose files must not be removed yet: uploads between writing their file and
/// committing the row that references it. Also the temporary files uploads still own.
public final class PictureRegistry: Sendable {
  private struct State {
    var pending: [String: Int] = [:]
    var temporaries: Set<String> = []
  }
  private let state = Locked(State())

  /// An empty registry.
  public init() {}

  public func adopt(temporary: String) {
    self.state.withLock { _ = $0.temporaries.insert(temporary) }
  }

  public func release(temporary: String) {
    self.state.withLock { _ = $0.temporaries.remove(temporary) }
  }

  public func hold(_ etag: String) {
    self.state.withLock { $0.pending[etag, default: 0] += 1 }
  }

  public func unhold(_ etag: String) {
    self.state.withLock {
      $0.pending[etag, default: 1] -= 1
      if $0.pending[etag] == 0 { $0.pending[etag] = nil }
    }
  }

  /// Runs `body` with the set of held etags and owned temporaries, under the lock, so no
  /// upload can hold a new etag while a sweep or a release decides what to remove.
  public func withHeld<T>(
    _ body: (_ etags: Set<String>, _ temporaries: Set<String>) throws -> T
  ) rethrows
    -> T
  {
    try self.state.withLock { state in
      try body(Set(state.pending.keys), state.temporaries)
    }
  }
}
