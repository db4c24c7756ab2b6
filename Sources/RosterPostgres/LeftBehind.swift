internal import Logging
internal import PostgresNIO
internal import RosterDomain
internal import RosterLocks

/// Work on a PostgreSQL connection that stops when its caller does, even on a connection that
/// stopped answering.
///
/// postgres-nio's queries do not end when their task is cancelled: a statement sent on a
/// connection that stopped answering (a restarting server that closed it without a word, a
/// network that drops everything) waits for good. A call waiting there would never end, and a
/// server shutting down waits for every call: measured in `Tests/Interop/replica/silent_test.py`,
/// where such calls never answered. So once the caller's task or its call
/// (`CallControl.current`) is cancelled, the work gets `grace` to end by itself (a healthy
/// server answers in milliseconds, and the connection goes back to the pool as usual); past
/// that, its connection is closed, which fails the statement, and the pool makes a new one.
///
/// Nothing runs per call but a cancellation handler and a hook: the timer starts only when
/// the caller is cancelled, and stops when the work ends. (Running each read in a task of its
/// own, which the caller could leave at once, cost more CPU per `GetEmployee`.)
enum LeftBehind {
  /// How long cancelled work may go on before its connection is closed.
  static let grace: Duration = .seconds(2)

  /// `body`'s answer; when the caller is cancelled and `body` has not ended `grace` later,
  /// `connection` is closed, and this throws `reason(_:)`.
  static func closingWhenStuck<T>(
    _ connection: PostgresConnection,
    _ body: () async throws -> T
  ) async throws -> T {
    let control = CallControl.current
    let watch = Watch(connection)
    let hook = control?.addCancellationHook { watch.cancelled() }
    defer {
      control?.removeCancellationHook(hook)
      watch.ended()
    }
    do {
      return try await withTaskCancellationHandler {
        try await body()
      } onCancel: {
        watch.cancelled()
      }
    } catch {
      if watch.closed { throw CallControl.stopError(control) }
      throw error
    }
  }

  /// The timer of one piece of work, started when its caller is cancelled.
  private final class Watch: Sendable {
    private struct State {
      var ended = false
      var closed = false
      var timer: Task<Void, Never>?
    }

    private let connection: PostgresConnection
    private let state = Locked(State())

    init(_ connection: PostgresConnection) {
      self.connection = connection
    }

    var closed: Bool { self.state.withLock { $0.closed } }

    func cancelled() {
      self.state.withLock { state in
        guard !state.ended, state.timer == nil else { return }
        state.timer = Task { [connection] in
          guard (try? await Task.sleep(for: LeftBehind.grace)) != nil else { return }
          let close = self.state.withLock { state -> Bool in
            guard !state.ended else { return false }
            state.closed = true
            return true
          }
          if close { connection.close().whenComplete { _ in } }
        }
      }
    }

    func ended() {
      let timer = self.state.withLock { state in
        state.ended = true
        return state.timer.take()
      }
      timer?.cancel()
    }
  }
}

extension PostgresConnection {
  /// Throws `unreachable` when this connection is closed.
  ///
  /// postgres-nio never answers a statement written to a connection whose channel has gone:
  /// once the channel's handlers are removed, the write is dropped and its promise is never
  /// completed. So a statement that follows another on the same connection (a transaction's
  /// next step, the ROLLBACK after a failure above all) checks first. Measured in
  /// `silent_test.py` with the silence starting mid-statement: heavy reads whose connection
  /// `LeftBehind` had closed then waited on their ROLLBACK for good, and their calls never
  /// answered.
  func checkOpen() throws {
    if self.isClosed { throw PostgresStore.unreachable }
  }

  /// One statement's rows, read by column index, never sent on a closed connection.
  func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRandomAccessRow] {
    try self.checkOpen()
    return try await self.query(query, logger: logger).collect().map { $0.makeRandomAccess() }
  }

  /// Ends the transaction open on this connection after its work failed with `error`: a
  /// ROLLBACK when the connection was still answering, else the connection is closed (which
  /// ends the transaction on the server, and the pool makes a new connection).
  ///
  /// `checkOpen` alone cannot tell: when a connection closes, postgres-nio fails its
  /// statements first and closes the channel after, so the task that sees the failure may
  /// still find the channel open and send its ROLLBACK into a channel about to lose its
  /// handlers, where it waits for good (seen in `silent_test.py` on a loaded machine: a held
  /// name search whose connection `LeftBehind` had closed never answered).
  func rollBack(after error: any Error, logger: Logger) async {
    guard Self.stillAnswering(after: error), !self.isClosed else {
      self.close().whenComplete { _ in }
      return
    }
    _ = try? await self.rows("ROLLBACK", logger: logger)
  }

  /// Runs `body` in one transaction on this connection: COMMIT when it returns; when it
  /// throws, `rollBack(after:logger:)`, and its error is rethrown.
  func transaction<T>(logger: Logger, _ body: () async throws -> T) async throws -> T {
    _ = try await self.rows("BEGIN", logger: logger)
    do {
      let value = try await body()
      _ = try await self.rows("COMMIT", logger: logger)
      return value
    } catch {
      await self.rollBack(after: error, logger: logger)
      throw error
    }
  }

  /// Whether a connection still answers after its work failed with `error`: PostgreSQL
  /// reported the error itself, or the work's own code threw it; not when the connection
  /// failed or closed, nor when the work was cancelled, a statement perhaps still running.
  ///
  /// Nor after a FATAL or PANIC error, which ends the session: the server closes the
  /// connection right after it. A ROLLBACK sent in between waited for good (a primary whose
  /// postmaster was killed answered a write transaction's statement with FATAL 57P01: the
  /// writer waited out its timeout in `failover_test.py`, and the writes behind it their
  /// deadlines).
  static func stillAnswering(after error: any Error) -> Bool {
    if let error = error as? PSQLError {
      guard error.code == .server else { return false }
      let severity = error.serverInfo?[.severity] ?? error.serverInfo?[.localizedSeverity]
      return severity != "FATAL" && severity != "PANIC"
    }
    if error is CancellationError { return false }
    return true
  }
}

/// Resumes a continuation with the first of several answers.
final class FirstAnswer: Sendable {
  private struct State {
    var continuation: CheckedContinuation<Bool, Never>?
    var running: Task<Void, Never>?
    var timer: Task<Void, Never>?
  }

  private let state: Locked<State>

  init(_ continuation: CheckedContinuation<Bool, Never>) {
    self.state = Locked(State(continuation: continuation))
  }

  /// The operation's answer: the timer stops, so nothing of it outlives the operation.
  private func answer(_ value: Bool) {
    let (continuation, timer) = self.state.withLock { ($0.continuation.take(), $0.timer.take()) }
    timer?.cancel()
    continuation?.resume(returning: value)
  }

  /// Answers false now, as the timeout does, and cancels the operation.
  func expire() {
    let (continuation, running) = self.state.withLock { ($0.continuation.take(), $0.running) }
    running?.cancel()
    continuation?.resume(returning: false)
  }

  /// `operation`'s answer, or false if it has none within `timeout` (or `expire()` comes
  /// first); then it is cancelled and left to finish by itself. Unlike a task group, this
  /// never waits for an operation that does not stop when cancelled (a task group's end
  /// awaits every child). `started` gets the answer to expire, before the operation runs.
  static func within(
    _ timeout: Duration,
    started: (FirstAnswer) -> Void = { _ in },
    _ operation: @escaping @Sendable () async -> Bool
  ) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      let answer = FirstAnswer(continuation)
      started(answer)
      let timer = Task {
        guard (try? await Task.sleep(for: timeout)) != nil else { return }
        answer.expire()
      }
      let running = Task {
        answer.answer(await operation())
      }
      let answered = answer.state.withLock { state -> Bool in
        state.running = running
        state.timer = timer
        return state.continuation == nil
      }
      // Answered or expired already, before the two tasks were recorded.
      if answered {
        timer.cancel()
        running.cancel()
      }
    }
  }
}
