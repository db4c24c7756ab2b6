internal import CoreMetrics
internal import Foundation
internal import NIOCore
internal import PostgresNIO
internal import RosterDomain
internal import RosterStore
internal import Synchronization

/// Admission for the reads whose cost grows with the data (counts that visit employees,
/// aggregates over raw sales, a month of days, name searches): at most `width` run at once,
/// each on a pooled connection of its own, `queueLimit` wait, and one more is refused with
/// `resourceExhausted` at once. So heavy calls never take every connection from the point
/// reads and the writer, as SQLite's heavy lane keeps them off its interactive threads.
final class HeavyReads: Sendable {
  let width: Int
  let queueLimit: Int
  private let state = Mutex(State())
  private let waitTimer = CoreMetrics.Timer(label: "roster_postgres_heavy_wait_seconds")
  private let refusals = Counter(label: "roster_postgres_heavy_refused_total")

  private struct State {
    var running = 0
    var nextID = 0
    var waiting: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
  }

  init(width: Int, queueLimit: Int) {
    self.width = max(1, width)
    self.queueLimit = max(0, queueLimit)
  }

  /// Runs `body` once admitted. Waiting ends early, with `callCancelled`, when the task is
  /// cancelled.
  ///
  /// - Throws: `resourceExhausted` when `width` run and `queueLimit` wait; else what `body`
  ///   throws.
  func run<T>(_ body: () async throws -> T) async throws -> T {
    let started = ContinuousClock.now
    try await self.enter()
    self.waitTimer.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
    defer { self.leave() }
    return try await body()
  }

  /// Reads running and waiting now, for tests and diagnostics.
  var load: (running: Int, waiting: Int) {
    self.state.withLock { ($0.running, $0.waiting.count) }
  }

  private func enter() async throws {
    enum Admission {
      case now
      case wait(Int)
      case refused
    }
    let admission: Admission = self.state.withLock { state in
      if state.running < self.width {
        state.running += 1
        return .now
      }
      guard state.waiting.count < self.queueLimit else { return .refused }
      state.nextID += 1
      return .wait(state.nextID)
    }
    switch admission {
    case .now: return
    case .refused:
      self.refusals.increment()
      throw StoreError(
        .resourceExhausted,
        "the server is busy with \(self.width) heavy calls and \(self.queueLimit) waiting; retry later"
      )
    case .wait(let id):
      try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation {
          (continuation: CheckedContinuation<Void, any Error>) in
          let cancelled: Bool = self.state.withLock { state in
            if Task.isCancelled { return true }
            state.waiting.append((id, continuation))
            return false
          }
          if cancelled { continuation.resume(throwing: StoreError.callCancelled) }
        }
      } onCancel: {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, any Error>? in
          guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
          return state.waiting.remove(at: index).continuation
        }
        waiter?.resume(throwing: StoreError.callCancelled)
      }
    }
  }

  /// Hands the place to the first waiter, or frees it.
  private func leave() {
    let next = self.state.withLock { state -> CheckedContinuation<Void, any Error>? in
      if state.waiting.isEmpty {
        state.running -= 1
        return nil
      }
      return state.waiting.removeFirst().continuation
    }
    next?.resume()
  }
}

/// One heavy read in progress: its statements run on one connection, in one read-only
/// transaction (one snapshot), under a statement timeout of what is left of the call's
/// deadline (at most the configured one).
struct HeavyRead: Sendable {
  let connection: PostgresConnection
  let logger: Logger

  func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
    try await self.connection.rows(query, logger: self.logger)
  }

  func row(_ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
    try await self.rows(query).first
  }
}

extension PostgresStore {
  /// Runs `body`, a read whose cost grows with the data, once `HeavyReads` admits it.
  ///
  /// The read stops when its call does: a cancelled call (the task, or its `CallControl`)
  /// has the server cancel the running statement (`pg_cancel_backend`, from another
  /// connection, only while this read's transaction is the one running there); a passed
  /// deadline ends it through `statement_timeout`, set to what is left of the deadline.
  ///
  /// - Throws: `resourceExhausted` when too many heavy reads run and wait; `callCancelled`,
  ///   `deadlinePassed` or `budgetSpent` when stopped; else as `rows`.
  ///
  /// `planner` settings (`enable_sort`: `off`) hold for the read's transaction, set with its
  /// timeout, in the same statement.
  func heavy<T: Sendable>(
    planner: [(String, String)] = [],
    _ body: @Sendable (HeavyRead) async throws -> T
  ) async throws -> T {
    let control = CallControl.current
    try CallControl.check(control)
    do {
      let traced = StoreTracing.context
      let queued = traced.map { _ in StoreTracing.now }
      return try await self.heavyReads.run {
        if let traced, let queued {
          StoreTracing.record("postgres.heavy_lane.wait", context: traced, from: queued)
        }
        return try await StoreTracing.withSpan("postgres.heavy_read") {
          try await self.reading { pool in
            try await pool.withConnection { connection in
              // A connection that stopped answering, where `pg_cancel_backend` cannot reach, is
              // closed soon after the cancellation (`LeftBehind`).
              try await LeftBehind.closingWhenStuck(connection) {
                try await self.heavy(
                  on: connection,
                  of: pool,
                  control: control,
                  planner: planner,
                  body
                )
              }
            }
          }
        }
      }
    } catch {
      if Task.isCancelled || control?.isCancelled == true { throw CallControl.stopError(control) }
      if Self.sqlState(error) == "57014", let deadline = control?.deadline,
        ContinuousClock.now >= deadline
      {
        throw StoreError.deadlinePassed
      }
      throw Self.mapped(error)
    }
  }

  private func heavy<T: Sendable>(
    on connection: PostgresConnection,
    of pool: HostPool,
    control: CallControl?,
    planner: [(String, String)],
    _ body: @Sendable (HeavyRead) async throws -> T
  ) async throws -> T {
    let read = HeavyRead(connection: connection, logger: self.logger)
    // A tag only this transaction carries (SET LOCAL ends with it), so a late cancel cannot
    // reach a statement that runs on this connection after the read.
    let tag = "roster-heavy-" + UUID().uuidString.prefix(13).lowercased()
    let timeout = Self.timeoutMilliseconds(
      budget: self.configuration.statementTimeout,
      deadline: control?.deadline
    )
    // BEGIN and the set-up (the backend's pid, the timeout, the planner settings) are queued on
    // the connection and not awaited: the read's own statement goes from the connection's event
    // loop as soon as they are done, without a hop through this task for each (each hop waits
    // for a thread on a busy machine). Their outcomes are checked after it; a failure of either
    // is the read's error (the read's statement then failed, or ran outside its transaction).
    try connection.checkOpen()
    let begun = connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    let settings = planner.map { ", set_config('\($0.0)', '\($0.1)', true)" }.joined()
    let setUp: EventLoopFuture<PostgresQueryResult> = connection.query(
      """
      SELECT pg_backend_pid(), set_config('statement_timeout', \(String(timeout)), true),
        set_config('application_name', \(tag), true)\(unescaped: settings)
      """,
      logger: self.logger
    )
    let pid = setUp.flatMapThrowing { result -> Int32 in
      guard let row = result.rows.first else {
        throw StoreError(.unavailable, "the database did not answer; try again")
      }
      return try row.makeRandomAccess()[0].decode(Int32.self)
    }
    do {
      // A cancel that comes before the set-up's answer is sent once the pid is known.
      let cancel: @Sendable () -> Void = {
        pid.whenSuccess { pid in
          Task {
            try? await pool.query(
              "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = \(pid) AND application_name = \(tag)"
            )
          }
        }
      }
      let hook = control?.addCancellationHook(cancel)
      defer { control?.removeCancellationHook(hook) }
      let outcome: Result<T, any Error>
      do {
        outcome = .success(
          try await withTaskCancellationHandler {
            try await body(read)
          } onCancel: {
            cancel()
          }
        )
      } catch {
        outcome = .failure(error)
      }
      // When BEGIN or the set-up failed, the read's statement failed with them (or ran outside
      // its transaction): theirs is the error.
      _ = try await begun.get()
      _ = try await pid.get()
      let value = try outcome.get()
      // Nor is COMMIT awaited: the reply needs nothing from it (the transaction only read),
      // and the connection's next statement, whoever leases it, is queued behind it. A COMMIT
      // that fails leaves nothing to undo: the connection's failure is its next user's.
      connection.query("COMMIT").whenFailure { [logger = self.logger] error in
        logger.debug("a heavy read's COMMIT failed", metadata: ["error": "\(error)"])
      }
      return value
    } catch {
      await read.connection.rollBack(after: error, logger: self.logger)
      throw error
    }
  }

  /// The statement timeout of a heavy read: what is left of the deadline, at most the budget,
  /// at least a millisecond (0 would mean none); 0 with neither.
  static func timeoutMilliseconds(budget: Duration?, deadline: ContinuousClock.Instant?) -> Int {
    var limit = budget.map { Int($0 / .milliseconds(1)) }
    if let deadline {
      let left = max(1, Int((deadline - ContinuousClock.now) / .milliseconds(1)))
      limit = min(limit ?? left, left)
    }
    return limit ?? 0
  }
}
