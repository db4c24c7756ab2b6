internal import Foundation
public import Logging
public import PostgresNIO
internal import RosterDomain
public import RosterPictures
public import RosterStore
internal import ServiceLifecycle
internal import Synchronization

/// The directory on PostgreSQL, for several Roster replicas over one shared database.
///
/// Reads take a pooled connection each; writes from many callers share transactions through
/// one writer (`WriteQueue`, group commit), and bulk work (upserts, batch deletes, sales
/// imports, pictures) runs in transactions of its own. Every transaction that changes
/// something numbers its changes just before it commits (`ChangeLog.append`), so the change
/// feed is in commit order across replicas, and announces them with `NOTIFY`: each replica
/// listens and wakes its watchers.
///
/// ```swift
/// let store = try await PostgresStore.open(PostgresConfiguration(url: PostgresURL(url)), logger: logger)
/// // run it as a service, before the gRPC server, in one ServiceGroup
/// ```
public final class PostgresStore: StoreBackend, PictureCatalog {
  public let configuration: PostgresConfiguration
  let client: PostgresClient
  let logger: Logger
  let feed: ChangeFeed
  let writes: WriteQueue
  let heavyReads: HeavyReads
  let pointReads: PointReads
  let pictures: PictureStorage
  /// The NOTIFY channel of this schema's change log.
  let channel: String
  /// Whether this process created the schema (it was empty, or absent, when it started):
  /// the one replica that may seed it.
  public let createdSchema: Bool

  private init(
    configuration: PostgresConfiguration,
    client: PostgresClient,
    latest: Int64,
    createdSchema: Bool,
    pictures: PictureStorage,
    logger: Logger
  ) {
    self.createdSchema = createdSchema
    self.configuration = configuration
    self.client = client
    self.logger = logger
    self.feed = ChangeFeed(latest: latest)
    self.pictures = pictures
    self.channel = "roster_changes_" + configuration.schema
    self.writes = WriteQueue(maximumBatch: configuration.maximumWriteBatch)
    self.heavyReads = HeavyReads(
      width: configuration.heavyReads,
      queueLimit: configuration.heavyQueueLimit
    )
    self.pointReads = PointReads(width: configuration.pointReads)
  }

  /// Connects, creates the schema or brings it up to date (once, however many replicas start
  /// together), and returns the store. Call `run()` (as a `Service`) before using it: the
  /// connection pool and the writer run there.
  ///
  /// - Throws: `invalidArgument` for a bad schema name, `unavailable` when the server cannot
  ///   be reached.
  public static func open(
    _ configuration: PostgresConfiguration,
    logger: Logger
  ) async throws -> PostgresStore {
    guard Self.isIdentifier(configuration.schema) else {
      throw StoreError(
        .invalidArgument,
        "schema '\(configuration.schema)' must be lower-case letters, digits and _"
      )
    }
    let (latest, created) = try await Migrator(configuration: configuration, logger: logger)
      .migrate()
    var options = PostgresClient.Configuration.Options()
    options.maximumConnections = configuration.maximumConnections
    // Every connection kept open, and the keep-alive our own (`keepAlive`): postgres-nio's
    // pool starts an idle timer (above the minimum) and a keep-alive timer each time a
    // connection comes back, and cancels them at its next lease, a task and a wake-up of
    // dispatch's timer thread per statement: less CPU a GetEmployee without them
    // (docs/performance.md, "The pool's timers").
    options.minimumConnections = configuration.maximumConnections
    options.keepAliveBehavior = nil
    options.additionalStartupParameters = Self.sessionParameters(configuration)
    var clientConfiguration = PostgresClient.Configuration(
      host: configuration.url.host,
      port: configuration.url.port,
      username: configuration.url.username,
      password: configuration.url.password,
      database: configuration.url.database,
      tls: try configuration.url.clientTLS()
    )
    clientConfiguration.options = options
    let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: logger)
    // Uploads in progress, in a directory of this store's own: the sweep removes files no
    // upload of *this* store owns, and replicas on one host must not sweep each other's.
    let scratch = configuration.scratchDirectory + "/" + UUID().uuidString.lowercased()
    let pictures = try PictureStorage(
      configuration: configuration.pictures,
      directory: scratch,
      cacheBytes: 0,
      logger: logger
    )
    return PostgresStore(
      configuration: configuration,
      client: client,
      latest: latest,
      createdSchema: created,
      pictures: pictures,
      logger: logger
    )
  }

  /// What every connection sets when it starts: the schema first on the search path, and the
  /// longest a statement may run.
  static func sessionParameters(_ configuration: PostgresConfiguration) -> [(String, String)] {
    var parameters = [
      ("search_path", "\(configuration.schema), public"), ("application_name", "roster"),
    ]
    if let timeout = configuration.statementTimeout {
      parameters.append(("statement_timeout", "\(timeout.components.seconds * 1000)"))
    }
    return parameters
  }

  static func isIdentifier(_ name: String) -> Bool {
    guard let first = name.unicodeScalars.first, first.properties.isLowercase || first == "_" else {
      return false
    }
    return name.count <= 40
      && name.unicodeScalars.allSatisfy {
        ("a" ... "z").contains($0) || ("0" ... "9").contains($0) || $0 == "_"
      }
  }

  // MARK: Service

  /// Runs the connection pool, the writer, the change listener and the periodic maintenance
  /// until graceful shutdown (or cancellation); then the writer finishes what it holds and the
  /// pool closes.
  public func run() async throws {
    // The pool runs in a task of its own: its force shutdown has been seen to stall (a
    // connection being closed that never reports closed), and a store that never stops
    // would hold up the process's exit. It gets `poolStopTimeout` to stop, then is left.
    //
    // Detached, so it does not inherit the graceful shutdown: `PostgresClient.run()` cancels
    // itself on graceful shutdown, which closed every connection at SIGTERM, the writer's
    // mid-batch too (measured in `silent_test.py`: the batch failed with
    // `clientClosedConnection` the moment shutdown began), where the writer must first get
    // `WriteQueue.drainLimit` to commit what it holds. `stop(pool, ...)` below ends it.
    let pool = Task.detached { await self.client.run() }
    // The change listener and the maintenance run in a task of their own too, for the same
    // reason: measured in `silent_test.py`, with PostgreSQL silent a poll of the change log
    // waiting for a pooled connection did not end when cancelled, and the store never closed.
    let background = Task {
      try? await withThrowingDiscardingTaskGroup { background in
        background.addTask { try await self.listen() }
        background.addTask { try await self.maintain() }
        background.addTask { try await self.keepAlive() }
      }
    }
    await withDiscardingTaskGroup { work in
      work.addTask { await self.writes.run(self) }
      work.addTask {
        try? await gracefulShutdown()
        // Graceful shutdown (or cancellation): the gRPC server has stopped (it shuts down
        // first). The background work stops, or is left after `poolStopTimeout`; the writer
        // finishes what it holds (`WriteQueue.drainLimit`); then the pool closes.
        await self.stop(background, "the change listener or the maintenance")
        await self.writes.close()
      }
    }
    self.feed.close()
    try? FileManager.default.removeItem(atPath: self.pictures.directory)
    await self.stop(pool, "the PostgreSQL connection pool")
    self.logger.info("store closed")
  }

  /// Cancels `task` and waits for it at most `poolStopTimeout`, then leaves it, saying so.
  private func stop<T: Sendable>(_ task: Task<T, Never>, _ what: String) async {
    task.cancel()
    let stopped = await FirstAnswer.within(Self.poolStopTimeout) {
      _ = await task.value
      return true
    }
    if !stopped {
      self.logger.warning(
        "\(what) did not stop in time; leaving it",
        metadata: ["timeout": "\(Self.poolStopTimeout)"]
      )
    }
  }

  /// How long `run` waits for the connection pool to stop at the end.
  static let poolStopTimeout: Duration = .seconds(5)

  public func closeChangeFeed() {
    self.feed.close()
  }

  /// PostgreSQL needs no special mode for an offline load: `body` runs as is, and the
  /// counters' deltas it wrote are folded at once (not at the next maintenance). Then the
  /// schema's tables are vacuumed and analyzed (`vacuumAnalyze`).
  public func withBulkLoad<T>(_ body: () async throws -> T) async throws -> T {
    let value = try await body()
    try await self.compactDepartmentCounts()
    try await self.compactNameCounts()
    try await self.vacuumAnalyze()
    return value
  }

  /// `VACUUM (ANALYZE)` of every table of the schema. A bulk load leaves its tables without
  /// statistics or a visibility map until autovacuum comes by, minutes later; meanwhile the
  /// planner guesses (medians by department several times slower a page at 10M sales:
  /// docs/aggregates-10m.md) and index-only scans visit the heap. Outside any transaction, with no statement
  /// timeout (it grows with the data; `RESET` gives the connection its own one back).
  func vacuumAnalyze() async throws {
    let started = ContinuousClock.now
    let tables = try await self.rows(
      "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = \(self.configuration.schema) ORDER BY 1"
    ).map { try $0[0].decode(String.self) }
    guard !tables.isEmpty else { return }
    do {
      try await self.client.withConnection { connection in
        _ = try await connection.query("SET statement_timeout = 0", logger: self.logger)
        do {
          _ = try await connection.query(
            PostgresQuery(unsafeSQL: "VACUUM (ANALYZE) " + tables.joined(separator: ", ")),
            logger: self.logger
          )
        } catch {
          // Not on a connection that stopped answering, where postgres-nio may never answer
          // (`rollBack(after:logger:)`): that one is closed instead.
          if PostgresConnection.stillAnswering(after: error), !connection.isClosed {
            _ = try? await connection.query("RESET statement_timeout", logger: self.logger)
          } else {
            connection.close().whenComplete { _ in }
          }
          throw error
        }
        try connection.checkOpen()
        _ = try await connection.query("RESET statement_timeout", logger: self.logger)
      }
    } catch {
      throw Self.mapped(error)
    }
    self.logger.info(
      "vacuumed and analyzed",
      metadata: ["tables": "\(tables.count)", "duration": "\(ContinuousClock.now - started)"]
    )
  }

  // MARK: Queries

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
        try await self.client.withConnection { connection in
          try await LeftBehind.closingWhenStuck(connection) { try await body(connection) }
        }
      }
    } catch {
      throw Self.mappedOrCancelled(error)
    }
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
          try await self.client.withConnection { connection in
            try await LeftBehind.closingWhenStuck(connection) {
              let transaction = WriteTransaction(connection: connection, logger: self.logger)
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
        if let last { self.feed.publish(last) }
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
  /// shared commit; errors as the services should see them.
  private func write<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    do {
      return try await StoreTracing.withSpan("postgres.write") { try await body() }
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
    guard let error = error as? PSQLError else { return error }
    if let state = error.serverInfo?[.sqlState] {
      switch state {
      case "57014": return StoreError.budgetSpent
      case "40001", "40P01":
        return StoreError(.unavailable, "the write met a concurrent one; try again")
      case "57P01", "57P02", "57P03", "08000", "08003", "08006":
        return Self.unreachable
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
