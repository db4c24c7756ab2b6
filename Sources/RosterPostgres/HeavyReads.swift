internal import CoreMetrics
internal import Foundation
internal import NIOCore
internal import PostgresNIO
internal import RosterDomain
internal import RosterLocks
internal import RosterStore

/// Admission for the reads whose cost grows with the data (counts that visit employees,
/// aggregates over raw sales, a month of days, name searches): at most `width` run at once,
/// each on a pooled connection of its own, `queueLimit` wait, and one more is refused with
/// `resourceExhausted` at once. So heavy calls never take every connection from the point
/// reads and the writer, as SQLite's heavy lane keeps them off its interactive threads.
final class HeavyReads: Sendable {
  let width: Int
  let queueLimit: Int
  private let state = Locked(State())
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

/// One heavy read in progress: its statements run on one connection, each carrying the read's
/// tag (a comment at its head, which `pg_stat_activity` shows), so that a cancel reaches this
/// read's statements and no other.
struct HeavyRead: Sendable {
  let connection: PostgresConnection
  let logger: Logger
  /// `/* roster-heavy-… */ `, unique to the read.
  let tag: String

  func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
    var tagged = query
    tagged.sql = self.tag + query.sql
    return try await self.connection.rows(tagged, logger: self.logger)
  }

  func row(_ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
    try await self.rows(query).first
  }
}

extension PostgresStore {
  /// Runs `body`, a read whose cost grows with the data, once `HeavyReads` admits it.
  ///
  /// The read stops when its call does: when the call is cancelled (the task, or its
  /// `CallControl`) or its deadline passes, the server cancels the read's running statement
  /// (`pg_cancel_backend`, from another connection, found by the read's tag). The session's
  /// statement timeout (`PostgresConfiguration.statementTimeout`) bounds a read with neither.
  ///
  /// - Parameter transaction: Whether the read's statements run in one read-only transaction:
  ///   one snapshot for all of them, and `SET LOCAL` settings that end with it. Without, a
  ///   read of one statement (its own snapshot) costs one round trip, not three.
  /// - Throws: `resourceExhausted` when too many heavy reads run and wait; `callCancelled`,
  ///   `deadlinePassed` or `budgetSpent` when stopped; else as `rows`.
  func heavy<T: Sendable>(
    transaction: Bool = false,
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
                  transaction: transaction,
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
    transaction: Bool,
    _ body: @Sendable (HeavyRead) async throws -> T
  ) async throws -> T {
    let name = "roster-heavy-" + UUID().uuidString.prefix(13).lowercased()
    let read = HeavyRead(connection: connection, logger: self.logger, tag: "/* \(name) */ ")
    let stop = HeavyReadStop(tag: read.tag, pool: pool, longest: self.answerTimeout)
    try connection.checkOpen()
    // BEGIN is queued on the connection and not awaited: the read's first statement goes from
    // the connection's event loop as soon as it is done, without a hop through this task (a
    // hop waits for a thread on a busy machine). Its outcome is checked after the read; its
    // failure is the read's error (the read's statement then failed, or ran outside it).
    let begun =
      transaction ? connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") : nil
    // The deadline is the call's: a timer on the connection's event loop, no task of its own.
    let timer = control?.deadline.map { deadline in
      connection.eventLoop.scheduleTask(
        in: .nanoseconds(Int64((deadline - .now) / .nanoseconds(1)))
      ) {
        stop.cancel()
      }
    }
    let hook = control?.addCancellationHook { stop.cancel() }
    var statementMayRun = false
    defer {
      stop.end(statementMayRun: statementMayRun)
      timer?.cancel()
      control?.removeCancellationHook(hook)
    }
    do {
      let outcome: Result<T, any Error>
      do {
        outcome = .success(
          try await withTaskCancellationHandler {
            try await body(read)
          } onCancel: {
            stop.cancel()
          }
        )
      } catch {
        outcome = .failure(error)
      }
      _ = try await begun?.get()
      let value = try outcome.get()
      // Nor is COMMIT awaited: the reply needs nothing from it (the transaction only read),
      // and the connection's next statement, whoever leases it, is queued behind it. A COMMIT
      // that fails leaves nothing to undo: the connection's failure is its next user's.
      if transaction {
        connection.query("COMMIT").whenFailure { [logger = self.logger] error in
          logger.debug("a heavy read's COMMIT failed", metadata: ["error": "\(error)"])
        }
      }
      return value
    } catch {
      // A connection that failed or was closed (`LeftBehind`) gave no answer: its statement
      // may still run at the server.
      statementMayRun = !PostgresConnection.stillAnswering(after: error)
      if transaction {
        await connection.rollBack(after: error, logger: self.logger)
      } else if statementMayRun {
        connection.close().whenComplete { _ in }
      }
      throw error
    }
  }
}

/// Stops one heavy read's statements at the server, once asked.
///
/// `pg_cancel_backend` reaches only a statement that runs: one asked for before the read's
/// statement started there (the deadline already near, a call cancelled at once) would be
/// lost, so a cancel that found nothing running is sent again, a little later, until the read
/// ends; and past its end while its last statement may still run at the server (its
/// connection was closed with no answer, as `LeftBehind` closes one whose cancel has not
/// landed: PostgreSQL does not notice a closed socket during a statement that sends nothing),
/// at growing intervals, until a cancel lands, a try fails, or `longest` has passed (the
/// statement timeout and a margin: past it the timeout has ended the statement; with no
/// timeout set, the cancels stop there all the same). Each statement carries the read's tag, so no
/// cancel reaches another's statement on the same connection, during the read or after it.
final class HeavyReadStop: Sendable {
  private struct State {
    var asked = false
    /// When the read ended, and whether its last statement may still run then.
    var ended: (at: ContinuousClock.Instant, statementMayRun: Bool)?
  }

  private let tag: String
  private let pool: HostPool
  private let longest: Duration
  private let state = Locked(State())

  init(tag: String, pool: HostPool, longest: Duration) {
    self.tag = tag
    self.pool = pool
    self.longest = longest
  }

  /// How long between two cancels that found nothing running, during the read.
  static let retry = Duration.milliseconds(20)
  /// The longest interval between two cancels after the read ended.
  static let longestRetry = Duration.seconds(1)

  func cancel() {
    let first = self.state.withLock { state -> Bool in
      defer { state.asked = true }
      return !state.asked && state.ended == nil
    }
    guard first else { return }
    Task { await self.send() }
  }

  private func send() async {
    var pause = Self.retry
    while true {
      let ended = self.state.withLock { $0.ended }
      if let ended, !ended.statementMayRun || .now - ended.at > self.longest { return }
      do {
        let found = try await self.pool.query(
          """
          SELECT pg_cancel_backend(pid) FROM pg_stat_activity
          WHERE state = 'active' AND starts_with(query, \(self.tag)) AND pid <> pg_backend_pid()
          """
        )
        if found > 0 { return }
      } catch {
        // A database that does not answer now will not run the statement past its timeout.
        if ended != nil { return }
      }
      try? await Task.sleep(for: pause)
      if ended != nil { pause = min(pause * 2, Self.longestRetry) }
    }
  }

  /// The read ended. No cancel is sent after this unless `statementMayRun` (see the type).
  func end(statementMayRun: Bool) {
    self.state.withLock { $0.ended = (.now, statementMayRun) }
  }
}
