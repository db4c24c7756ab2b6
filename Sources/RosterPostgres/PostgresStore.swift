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
  /// The connection pool, on the host the address names (`HostPool`).
  let pool: HostPool
  /// The hot standbys that serve reads, if any (`reading`).
  let standbys: Standbys?
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
    pool: HostPool,
    standbys: Standbys?,
    latest: Int64,
    createdSchema: Bool,
    pictures: PictureStorage,
    logger: Logger
  ) {
    self.createdSchema = createdSchema
    self.configuration = configuration
    self.pool = pool
    self.standbys = standbys
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
    let (latest, created, endpoint) = try await Migrator(
      configuration: configuration,
      logger: logger
    ).migrate()
    let pool = try HostPool(configuration: configuration, endpoint: endpoint, logger: logger)
    // Uploads in progress, in a directory of this store's own: the sweep removes files no
    // upload of *this* store owns, and replicas on one host must not sweep each other's.
    let scratch = configuration.scratchDirectory + "/" + UUID().uuidString.lowercased()
    let pictures = try PictureStorage(
      configuration: configuration.pictures,
      directory: scratch,
      cacheBytes: 0,
      logger: logger
    )
    let standbys =
      configuration.standbys.isEmpty
      ? nil
      : try Standbys(urls: configuration.standbys, configuration: configuration, logger: logger)
    return PostgresStore(
      configuration: configuration,
      pool: pool,
      standbys: standbys,
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
      ("search_path", "\(configuration.schema), public"),
      ("application_name", configuration.url.applicationName),
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
    let pool = Task.detached {
      await withDiscardingTaskGroup { pools in
        pools.addTask { await self.pool.run() }
        if let standbys = self.standbys {
          pools.addTask { await standbys.run { [feed = self.feed] in feed.latest } }
        }
      }
    }
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

  /// Runs `body`, an offline load, bare when the directory starts empty (`BulkLoad`): the
  /// counters, rollups, indexes and keys derived from the rows are built once at the end,
  /// also when `body` fails. The counters' deltas are then folded at once (not at the next
  /// maintenance) and their tables rewritten compact, and the schema's tables are vacuumed
  /// and analyzed (`vacuumAnalyze`).
  public func withBulkLoad<T>(_ body: () async throws -> T) async throws -> T {
    var value: T? = nil
    try await self.withSetting("statement_timeout", "0") { connection in
      _ = try await connection.rows(BulkLoad.lock, logger: self.logger)
      do {
        let bare = try await BulkLoad.begin(on: connection, logger: self.logger)
        do {
          value = try await bare ? self.feed.withoutLoggingEachWrite(body) : body()
        } catch {
          // The load's own error is the one to report; a rebuild that fails too leaves the
          // journal, which the next start finishes.
          if bare {
            do {
              try await self.finishBulkLoad()
            } catch let rebuild {
              self.logger.error(
                "the rebuild after a failed bulk load failed too; the next start finishes it",
                metadata: ["error": "\(String(reflecting: rebuild))"]
              )
            }
          }
          throw error
        }
        if bare { try await self.finishBulkLoad() }
      } catch {
        if PostgresConnection.stillAnswering(after: error), !connection.isClosed {
          _ = try? await connection.rows(BulkLoad.unlock, logger: self.logger)
        }
        throw error
      }
      _ = try await connection.rows(BulkLoad.unlock, logger: self.logger)
    }
    try await self.pollLatest()
    try await self.compactCounters(.always)
    try await self.vacuumAnalyze()
    return value!
  }

  /// Both lanes of a bulk load's rebuild at once, each on a pooled connection of its own.
  private func finishBulkLoad() async throws {
    try await withThrowingDiscardingTaskGroup { lanes in
      for lane in BulkLoad.Lane.allCases {
        lanes.addTask {
          try await self.withSetting("statement_timeout", "0") { connection in
            try await BulkLoad.finish(lane, on: connection, logger: self.logger)
          }
        }
      }
    }
  }

  /// `VACUUM (ANALYZE)` of every table of the schema. A bulk load leaves its tables without
  /// statistics or a visibility map until autovacuum comes by, minutes later; meanwhile the
  /// planner guesses (medians by department several times slower a page at 10M sales:
  /// docs/aggregates-10m.md) and index-only scans visit the heap. Outside any transaction.
  func vacuumAnalyze() async throws {
    let started = ContinuousClock.now
    let tables = try await self.rows(
      "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = \(self.configuration.schema) ORDER BY 1"
    ).map { try $0[0].decode(String.self) }
    guard !tables.isEmpty else { return }
    // No statement timeout: it grows with the data.
    try await self.withSetting("statement_timeout", "0") { connection in
      _ = try await connection.query(
        PostgresQuery(unsafeSQL: "VACUUM (ANALYZE) " + tables.joined(separator: ", ")),
        logger: self.logger
      )
    }
    self.logger.info(
      "vacuumed and analyzed",
      metadata: ["tables": "\(tables.count)", "duration": "\(ContinuousClock.now - started)"]
    )
  }

  /// Runs `body` on one pooled connection with the session setting `name` set to `value`
  /// (`SET`), outside any transaction; `RESET` gives the connection its own value back after.
  func withSetting(
    _ name: String,
    _ value: String,
    _ body: (PostgresConnection) async throws -> Void
  ) async throws {
    do {
      try await self.pool.withConnection { connection in
        _ = try await connection.query(
          PostgresQuery(unsafeSQL: "SET \(name) = \(value)"),
          logger: self.logger
        )
        do {
          try await body(connection)
        } catch {
          // Not on a connection that stopped answering, where postgres-nio may never answer
          // (`rollBack(after:logger:)`): that one is closed instead.
          if PostgresConnection.stillAnswering(after: error), !connection.isClosed {
            _ = try? await connection.query(
              PostgresQuery(unsafeSQL: "RESET \(name)"),
              logger: self.logger
            )
          } else {
            connection.close().whenComplete { _ in }
          }
          throw error
        }
        try connection.checkOpen()
        _ = try await connection.query(
          PostgresQuery(unsafeSQL: "RESET \(name)"),
          logger: self.logger
        )
      }
    } catch {
      throw Self.mapped(error)
    }
  }
}
