internal import Foundation
internal import Logging
internal import PostgresNIO
internal import RosterDomain
internal import RosterPictures
internal import RosterStore
internal import ServiceLifecycle
internal import Synchronization
internal import _ConnectionPoolModule

// The statements every part of the store runs through: reads, transactions, and their errors.
extension PostgresStore {
  /// Runs one statement on a pooled connection and returns its rows.
  func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
    try await self.read { connection in try await connection.rows(query, logger: self.logger) }
  }

  /// Runs `body` on a pooled connection, as a read's span: a stuck statement stops soon after
  /// its caller is cancelled (`LeftBehind`), and a cancelled caller is told so
  /// (`mappedOrCancelled`).
  func read<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
    do {
      return try await StoreTracing.withSpan("postgres.query") {
        try await self.reading { pool in
          try await pool.withConnection { connection in
            try await LeftBehind.closingWhenStuck(connection) { try await body(connection) }
          }
        }
      }
    } catch {
      throw Self.mappedOrCancelled(error)
    }
  }

  /// Runs `body` with the pool the current call's reads go to: a standby's when the call may
  /// read there and one serves it (`Standbys.serve`), else the primary's.
  func reading<T: Sendable>(_ body: (HostPool) async throws -> T) async throws -> T {
    if let standbys = self.standbys, let control = CallControl.current, control.standbyReads,
      let value = try await standbys.serve(mustSee: control.mustSee, body)
    {
      return value
    }
    return try await body(self.pool)
  }

  /// How long a statement may go without an answer before it is given up: the statement
  /// timeout (30 s without one) and 5 s for the answer to arrive.
  var answerTimeout: Duration {
    (self.configuration.statementTimeout ?? .seconds(30)) + .seconds(5)
  }

  /// Runs one statement that returns at most one row.
  func row(_ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
    try await self.rows(query).first
  }

  /// Runs `body` in a transaction of its own on a pooled connection, recording the changes it
  /// makes, and publishes them once committed. Retried, from the start, when PostgreSQL chose
  /// it as the victim of a deadlock or a serialization failure: `body` must be safe to run
  /// again.
  ///
  /// Once its task is cancelled (the writer's timeout, a bulk write's call past its deadline,
  /// the store's shutdown), a transaction still waiting on PostgreSQL `LeftBehind.grace` later
  /// has its connection closed, which rolls it back: a statement on a connection that stopped
  /// answering would otherwise wait for good.
  func transaction<T: Sendable>(_ body: (WriteTransaction) async throws -> T) async throws -> T {
    var attempt = 0
    while true {
      attempt += 1
      do {
        let (value, last) = try await StoreTracing.withSpan("postgres.transaction") {
          try await self.pool.withConnection { connection in
            try await LeftBehind.closingWhenStuck(connection) {
              let transaction = WriteTransaction(
                connection: connection,
                logger: self.logger,
                logsChanges: self.feed.logsEachWrite
              )
              try await transaction.execute("BEGIN")
              do {
                let value = try await body(transaction)
                let last = try await ChangeLog.append(
                  transaction.changes,
                  on: transaction,
                  channel: self.channel
                )
                try await transaction.execute("COMMIT")
                return (value, last)
              } catch {
                await connection.rollBack(after: error, logger: self.logger)
                throw error
              }
            }
          }
        }
        if let last {
          self.feed.publish(last)
          CallControl.current?.wrote(through: last)
        }
        return value
      } catch {
        if attempt < 5, Self.isRetryable(error) {
          // The victim of a deadlock or serialization failure: after a short random pause,
          // so the two do not meet again.
          try await Task.sleep(for: .milliseconds(Int.random(in: 1 ... (10 * attempt))))
          continue
        }
        throw Self.mapped(error)
      }
    }
  }

  /// A write through the group-commit writer: `body` runs in a transaction it may share with
  /// other writes (in a savepoint of its own unless `savepoint` is false; see
  /// `WriteQueue.submit`), and this returns once that transaction has committed.
  func submit<T: Sendable>(
    savepoint: Bool = true,
    _ body: @escaping @Sendable (WriteTransaction) async throws -> T
  ) async throws -> T {
    try await self.write { try await self.writes.submit(savepoint: savepoint, body) }
  }

  /// An update through the group-commit writer (`WriteQueue.submitUpdate`): `finish` makes the
  /// answer of the row it read as it was (nil: no such employee), in the update's transaction.
  func submitUpdate<T: Sendable>(
    _ statement: EmployeeUpdate,
    _ finish: @escaping @Sendable (WriteTransaction, PostgresRandomAccessRow?, Int64) throws -> T
  ) async throws -> T {
    try await self.write { try await self.writes.submitUpdate(statement, finish) }
  }

  /// A create through the group-commit writer (`WriteQueue.submitInsert`): `finish` makes the
  /// answer of the new row's id (nil: the guid is taken), in the create's transaction.
  func submitInsert<T: Sendable>(
    _ employee: Employee,
    _ finish: @escaping @Sendable (WriteTransaction, Int64?, Int64) throws -> T
  ) async throws -> T {
    try await self.write { try await self.writes.submitInsert(employee, finish) }
  }

  /// A write through the writer, as a span that covers the wait for it, the write and the
  /// shared commit; errors as the services should see them. The call's change token is the
  /// feed's end once the writer answered: its batch was published before that.
  private func write<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    do {
      let value = try await StoreTracing.withSpan("postgres.write") { try await body() }
      CallControl.current?.wrote(through: self.feed.latest)
      return value
    } catch {
      throw Self.mapped(error)
    }
  }

  static let unreachable = StoreError(.unavailable, "the database cannot be reached; try again")

  /// `mapped(error)`, or the call's cancellation (`CallControl.stopError`) when the task or its call
  /// was cancelled: the pool then answers with an error of its own (`CancellationError`, or
  /// its `requestCancelled`), which a client should see as the cancellation it is.
  static func mappedOrCancelled(_ error: any Error) -> any Error {
    let control = CallControl.current
    if Task.isCancelled || control?.isCancelled == true { return CallControl.stopError(control) }
    return Self.mapped(error)
  }

  /// A failure as the services should see it: a `StoreError` for what a client can act on,
  /// else the error as is (logged, `INTERNAL`, no SQL to the client).
  static func mapped(_ error: any Error) -> any Error {
    // The pool could not open a connection (its circuit breaker), or was shut down for another
    // host's (`HostPool`): the database cannot be reached.
    if let error = error as? ConnectionPoolError, error != .requestCancelled {
      return Self.unreachable
    }
    guard let error = error as? PSQLError else { return error }
    if let state = error.serverInfo?[.sqlState] {
      switch state {
      case "57014": return StoreError.budgetSpent
      case "40001", "40P01":
        return StoreError(.unavailable, "the write met a concurrent one; try again")
      case "57P01", "57P02", "57P03", "08000", "08003", "08006":
        return Self.unreachable
      case "25006":
        // A write on a server that takes none: a standby, or a primary since demoted.
        return StoreError(.unavailable, "the database does not take writes here; try again")
      default: return error
      }
    }
    switch error.code {
    case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown,
      .poolClosed:
      return Self.unreachable
    default: return error
    }
  }

  /// Whether `error` says the server is gone, or no longer the one to use: the connection
  /// failed or the server closed it, it is shutting down or starting, or it refused a write
  /// as a standby (`HostPool` then finds the host again). Not a connection this process
  /// closed (a statement left behind, the pool's own shutdown).
  static func losesHost(_ error: any Error) -> Bool {
    // postgres-nio's pool failed to open a connection and fails its leases at once: measured
    // in `standby_test.py`, a standby stopped with its connections idle gave no call a
    // connection error, only this.
    if let error = error as? ConnectionPoolError {
      return error == .connectionCreationCircuitBreakerTripped
    }
    guard let error = error as? PSQLError else { return false }
    if let state = error.serverInfo?[.sqlState] {
      return ["57P01", "57P02", "57P03", "08000", "08003", "08006", "25006"].contains(state)
    }
    switch error.code {
    case .connectionError, .serverClosedConnection, .uncleanShutdown: return true
    default: return false
    }
  }

  static func isRetryable(_ error: any Error) -> Bool {
    guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else {
      return false
    }
    return state == "40001" || state == "40P01"
  }

  /// The SQLSTATE of a server error, if `error` is one.
  static func sqlState(_ error: any Error) -> String? {
    (error as? PSQLError)?.serverInfo?[.sqlState]
  }

  static func nowMillis() -> Int64 {
    Int64(Date().timeIntervalSince1970 * 1000)
  }
}
