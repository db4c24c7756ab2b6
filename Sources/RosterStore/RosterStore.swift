internal import Foundation
internal import GRDB
public import Logging

/// The one store every service shares: a WAL-mode SQLite database behind a GRDB pool.
///
/// Reads run on reader connections in the calling task, with cached prepared statements,
/// so a point read costs no thread hop. Writes go through the single writer connection.
///
/// ```swift
/// let store = try RosterStore(configuration: StoreConfiguration(path: "data/roster.sqlite"))
/// let employee = try store.employee(guid: guid, fields: .all)
/// ```
public struct RosterStore: Sendable {
  let pool: DatabasePool
  /// The configuration the store was opened with.
  public let configuration: StoreConfiguration

  /// Opens (creating if needed) the database and brings its schema up to date.
  public init(
    configuration: StoreConfiguration,
    logger: Logger = Logger(label: "roster.store")
  ) throws {
    self.configuration = configuration
    let directory = URL(fileURLWithPath: configuration.path).deletingLastPathComponent()
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    self.pool = try DatabasePool(
      path: configuration.path,
      configuration: Self.grdbConfiguration(configuration, logger: logger)
    )
    try Self.migrator.migrate(self.pool)
    // A bulk load that died before rebuilding its indexes left their DDL behind.
    try self.finishBulkLoad()
  }

  private static func grdbConfiguration(
    _ settings: StoreConfiguration,
    logger: Logger
  ) -> Configuration {
    var config = Configuration()
    config.foreignKeysEnabled = true
    config.busyMode = .timeout(settings.busyTimeoutSeconds)
    config.maximumReaderCount = settings.maximumReaderCount
    config.label = "roster"
    let sqlDebug = settings.sqlDebug
    config.prepareDatabase { db in
      try db.execute(
        sql: """
          PRAGMA cache_size = -\(settings.cacheSizeKiB);
          PRAGMA mmap_size = \(settings.mmapSize);
          PRAGMA journal_size_limit = \(settings.journalSizeLimit);
          PRAGMA busy_timeout = \(Int(settings.busyTimeoutSeconds * 1000));
          PRAGMA temp_store = MEMORY;
          """
      )
      if sqlDebug {
        db.trace(options: .profile) { event in
          if case let .profile(statement, duration) = event {
            logger.info(
              "sql",
              metadata: [
                "sql": "\(statement.expandedSQL)",
                "ms": "\(String(format: "%.3f", duration * 1000))",
              ]
            )
          }
        }
      }
    }
    return config
  }

  /// Runs `body` on a reader connection, on the calling thread, inside one read transaction.
  ///
  /// Synchronous on purpose: a point read takes microseconds, and an async hop to GRDB's
  /// reader queue and back costs more than the read itself. Keep `body` short and never
  /// hold it across a suspension point; long listings read page by page.
  func read<T>(_ body: (Database) throws -> T) throws -> T {
    try self.pool.read(body)
  }

  /// Like `read`, but without BEGIN and COMMIT around `body`: for a body that runs exactly
  /// one SELECT, which SQLite already reads from one consistent snapshot. The transaction
  /// statements cost more than a point read itself.
  func readStatement<T>(_ body: (Database) throws -> T) throws -> T {
    try self.pool.unsafeRead(body)
  }

  /// Runs `body` in one write transaction on the writer connection.
  func write<T>(_ body: (Database) throws -> T) throws -> T {
    try self.pool.write(body)
  }

  /// The value of a PRAGMA on a reader connection, for checks and diagnostics.
  public func pragma(_ name: String) throws -> String? {
    try self.read { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
  }
}
