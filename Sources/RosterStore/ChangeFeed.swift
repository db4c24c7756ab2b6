internal import RosterDomain
internal import RosterLocks
internal import Synchronization

/// Tells watchers that the change log grew, without ever making a writer wait for them.
///
/// It holds only the sequence number of the newest committed change. Each watcher reads the
/// log itself, at its own pace, so a slow watcher costs memory for nothing but its own page.
/// Every backend keeps one: SQLite publishes after its own commits; PostgreSQL also when
/// another replica's commit is announced (LISTEN/NOTIFY).
package final class ChangeFeed: Sendable {
  private struct State {
    var latest: Int64
    var closed = false
    var nextID = 0
    var waiters: [Int: CheckedContinuation<Int64, any Error>] = [:]
  }

  private let state: Locked<State>
  private let quiet = Atomic(false)

  package init(latest: Int64) {
    self.state = Locked(State(latest: latest))
  }

  /// Whether each write records its changes in the log: not during a bulk load into an empty
  /// directory, whose end records the whole load as one gap (`StoreBackend.withBulkLoad`).
  package var logsEachWrite: Bool {
    !self.quiet.load(ordering: .acquiring)
  }

  /// Runs `body`, a bulk load into an empty directory, with `logsEachWrite` false.
  package func withoutLoggingEachWrite<T>(_ body: () async throws -> T) async throws -> T {
    self.quiet.store(true, ordering: .releasing)
    defer { self.quiet.store(false, ordering: .releasing) }
    return try await body()
  }

  /// The sequence number of the newest committed change.
  package var latest: Int64 {
    self.state.withLock { $0.latest }
  }

  /// Records that changes up to `sequence` are committed, and wakes every watcher.
  package func publish(_ sequence: Int64) {
    let waiters = self.state.withLock { state -> [CheckedContinuation<Int64, any Error>] in
      guard sequence > state.latest else { return [] }
      state.latest = sequence
      defer { state.waiters.removeAll() }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume(returning: sequence) }
  }

  /// Ends every current and future wait with `StoreError.unavailable` (server shutdown).
  package func close() {
    let waiters = self.state.withLock { state -> [CheckedContinuation<Int64, any Error>] in
      state.closed = true
      defer { state.waiters.removeAll() }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume(throwing: Self.closedError) }
  }

  private static let closedError = StoreError(
    .unavailable,
    "the server is shutting down; resume from the last token received"
  )

  /// Returns once a change after `sequence` is committed, with the newest sequence number.
  ///
  /// - Throws: `CancellationError` when the task is cancelled, `callCancelled` when the call
  ///   it serves (`CallControl.current`) is (its client went away: gRPC does not cancel the
  ///   handler's task then), `unavailable` once closed.
  package func wait(after sequence: Int64) async throws -> Int64 {
    let id = self.state.withLock { state -> Int in
      state.nextID += 1
      return state.nextID
    }
    let control = CallControl.current
    let hook = control?.addCancellationHook {
      self.end(id, throwing: CallControl.stopError(control))
    }
    defer { control?.removeCancellationHook(hook) }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let outcome = self.state.withLock { state -> Result<Int64, any Error>? in
          if state.closed { return .failure(Self.closedError) }
          if Task.isCancelled { return .failure(CancellationError()) }
          if let control, control.isCancelled { return .failure(control.stopError) }
          if state.latest > sequence { return .success(state.latest) }
          state.waiters[id] = continuation
          return nil
        }
        if let outcome { continuation.resume(with: outcome) }
      }
    } onCancel: {
      self.end(id, throwing: CancellationError())
    }
  }

  /// Ends one wait, if it is still waiting, with `error`.
  private func end(_ id: Int, throwing error: any Error) {
    let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
    waiter?.resume(throwing: error)
  }
}
