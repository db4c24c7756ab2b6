/// How the store opens its database. Every knob has a default tuned for a 2-core server.
///
/// ```swift
/// var config = StoreConfiguration(path: "data/roster.sqlite")
/// config.cacheSizeKiB = 64 * 1024
/// let store = try RosterStore(configuration: config)
/// ```
public struct StoreConfiguration: Sendable {
  /// Path of the SQLite file. Its directory is created when missing.
  public var path: String
  /// Page cache per connection, in KiB (`PRAGMA cache_size = -N`).
  public var cacheSizeKiB: Int = 32 * 1024
  /// Bytes of the file mapped into memory for reads (`PRAGMA mmap_size`).
  public var mmapSize: Int = 256 * 1024 * 1024
  /// Size the WAL is truncated back to after a checkpoint (`PRAGMA journal_size_limit`).
  public var journalSizeLimit: Int = 64 * 1024 * 1024
  /// How long a connection waits on a lock before failing, in seconds.
  public var busyTimeoutSeconds: Double = 5
  /// The most reader connections open at once.
  public var maximumReaderCount: Int = 8
  /// Logs every statement with its duration when true (the SQLDebug of Core Data).
  public var sqlDebug: Bool = false

  /// Creates a configuration for the database at `path`.
  public init(path: String) {
    self.path = path
  }
}
