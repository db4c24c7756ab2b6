internal import Logging
internal import PostgresNIO
internal import RosterDomain

/// Brings the schema up to date at start, on a connection of its own.
///
/// Every migration runs inside one transaction holding an advisory lock on the schema, so
/// replicas that start together take turns: the first applies what is missing, the others
/// find it done. Deployments in other schemas of the same database do not wait for it; only
/// the extension Roster needs, which is the database's, is created under a lock they all
/// share, in a transaction of its own. A database migrated by a newer Roster is refused
/// rather than written with old rules. No statement timeout applies: waiting for another
/// replica's migration, or building an index over millions of rows, takes what it takes.
struct Migrator {
  var configuration: PostgresConfiguration
  var logger: Logger

  /// The key of the advisory lock under which Roster creates extensions ("Roster" in ASCII);
  /// a schema's migrations lock a key derived from it and the schema's name.
  static let lockKey: Int64 = 0x526F_7374_6572

  /// Migrates, and returns the newest change's sequence number, whether the schema was
  /// created here, and the host it was migrated on (the one the pool starts on).
  func migrate() async throws -> (
    latest: Int64, created: Bool, endpoint: PostgresURL.Endpoint
  ) {
    let (connection, endpoint) = try await HostFinder(
      configuration: self.configuration,
      logger: self.logger
    ).connect(attempts: 20)
    do {
      let created = try await self.migrate(on: connection)
      // After the rebuild, which logs the load it finishes (`BulkLoad.logGap`).
      try await self.finishBulkLoad(on: connection)
      var latest: Int64 = 0
      for try await value in try await connection.query(
        "SELECT last_seq FROM change_log_state",
        logger: self.logger
      ).decode(Int64.self) {
        latest = value
      }
      try? await connection.close()
      return (latest, created, endpoint)
    } catch {
      try? await connection.close()
      throw PostgresStore.mapped(error)
    }
  }

  /// Connects to the host the address's `target_session_attrs` names (a connection of its
  /// own, outside the pool), retrying for about ten seconds while no host suits or answers.
  func connect() async throws -> PostgresConnection {
    try await HostFinder(configuration: self.configuration, logger: self.logger)
      .connect(attempts: 20).connection
  }

  /// Migrates; returns whether the schema was created here.
  private func migrate(on connection: PostgresConnection) async throws -> Bool {
    let schema = self.configuration.schema
    let known = PostgresSchema.migrations.last?.version ?? 0
    try await self.transaction(on: connection) {
      try await connection.query(
        "SELECT pg_advisory_xact_lock(\(Self.lockKey))",
        logger: self.logger
      ).collect()
      try await connection.query(
        "CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public",
        logger: self.logger
      )
    }
    return try await self.transaction(on: connection) {
      try await connection.query(
        "SELECT pg_advisory_xact_lock(hashtextextended(\(schema), \(Self.lockKey)))",
        logger: self.logger
      ).collect()
      // Asked of the catalog table itself: reading it takes a lock, which makes this backend
      // take in what others committed while it waited for the advisory lock. CREATE SCHEMA IF
      // NOT EXISTS alone trusted a stale cache (the search path names the schema, so the
      // extension's transaction had cached it as missing) and failed as a duplicate.
      let exists =
        try await connection.query(
          "SELECT count(*) FROM pg_namespace WHERE nspname = \(schema)",
          logger: self.logger
        ).collect().first?.decode(Int64.self) ?? 0
      if exists == 0 {
        try await connection.query(
          PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"),
          logger: self.logger
        )
      }
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS schema_migrations (
          version    INTEGER PRIMARY KEY,
          name       TEXT NOT NULL,
          applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """,
        logger: self.logger
      )
      var current = 0
      for try await version in try await connection.query(
        "SELECT coalesce(max(version), 0) FROM schema_migrations",
        logger: self.logger
      ).decode(Int.self) {
        current = version
      }
      if current > known {
        throw StoreError(
          .unavailable,
          "the database schema is at version \(current), newer than this roster's \(known); run a newer roster"
        )
      }
      for migration in PostgresSchema.migrations where migration.version > current {
        self.logger.info(
          "migrating",
          metadata: [
            "schema": "\(schema)", "version": "\(migration.version)", "name": "\(migration.name)",
          ]
        )
        for statement in migration.statements {
          try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
        }
        try await connection.query(
          "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
          logger: self.logger
        )
      }
      return current == 0
    }
  }

  /// Finishes a bulk load that stopped before its end (`BulkLoad`), unless one is running
  /// (its lock is held). The lock goes with the connection, which `migrate` closes.
  private func finishBulkLoad(on connection: PostgresConnection) async throws {
    guard
      try await connection.rows(BulkLoad.tryLock, logger: self.logger).first?[0].decode(Bool.self)
        == true
    else {
      self.logger.warning("a bulk load is running; its rebuild is left to it")
      return
    }
    for lane in BulkLoad.Lane.allCases
    where try await BulkLoad.finish(lane, on: connection, logger: self.logger) {
      self.logger.warning(
        "finished the rebuild of a bulk load that had stopped",
        metadata: ["lane": "\(lane.rawValue)"]
      )
    }
  }

  /// Runs `body` in a transaction with no statement timeout (the connection is the
  /// migration's own, so the session's setting does).
  private func transaction<T>(
    on connection: PostgresConnection,
    _ body: () async throws -> T
  ) async throws -> T {
    try await connection.query("SET statement_timeout = 0", logger: self.logger)
    return try await connection.transaction(logger: self.logger, body)
  }
}
