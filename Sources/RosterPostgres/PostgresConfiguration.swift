public import Foundation
public import RosterDomain
public import RosterPictures

/// Where the PostgreSQL backend connects and how it behaves.
public struct PostgresConfiguration: Sendable {
  /// The server, as `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.
  public var url: PostgresURL
  /// The schema holding Roster's tables; several deployments (or tests) can share a database
  /// with a schema each.
  public var schema: String = "roster"
  /// Connections to the server; reads and the writer share them. The pool keeps one open
  /// and opens the others as calls need them (`HostPool.clientConfiguration`).
  public var maximumConnections: Int = Self.defaultMaximumConnections
  /// How often every pooled connection runs a trivial statement while the store runs
  /// (`PostgresStore.keepAlive`), so an idle connection keeps its place in firewalls and
  /// NATs, and one that died is found and replaced before a call needs it.
  public var keepAliveInterval: Duration = .seconds(30)
  /// How long the host may take to accept a connection of the pool's own watchdog, while
  /// calls wait for one and none is given, before it is taken for lost and calls fail with
  /// `unavailable` until it or another answers (`HostPool`).
  public var hostAnswerLimit: Duration = .seconds(3)
  /// The most writes that share one transaction (group commit).
  public var maximumWriteBatch: Int = 256
  /// Point reads (`GetEmployee`) that run at once, each one statement for every read that
  /// waited for it (`PointReads`). Fewer statements carry more reads each, and each statement
  /// costs the replica the same whatever it carries (TLS, postgres-nio, a round trip); more
  /// let a database with idle cores answer a moderate load sooner. 2 gave the most calls per
  /// second at 64 in flight and lost nothing at 4 (docs/performance.md, "Point reads two at a
  /// time").
  public var pointReads: Int = Self.defaultPointReads
  /// Rows per transaction of a bulk upsert.
  public var bulkChunkRows: Int = 2_000
  /// The longest one query may run before the server stops it; nil for no limit.
  public var statementTimeout: Duration? = .seconds(30)
  /// Heavy reads (counts, aggregates over raw sales, a month of days, name searches) that
  /// run at once, each on a connection; the rest of the pool stays for point reads and the
  /// writer.
  public var heavyReads: Int = HeavyReadDefaults.width
  /// Heavy reads that may wait for a place; one more is refused with RESOURCE_EXHAUSTED.
  public var heavyQueueLimit: Int = HeavyReadDefaults.queueLimit
  /// The sales a page of medians by year, month or day reads at most (at least one group):
  /// as on SQLite, it ends at a group boundary once its groups hold this many.
  public var medianRowsPerPage: Int64 = 500_000
  /// How much history the change log keeps.
  public var changeLogMaximumAge: Duration = .seconds(7 * 24 * 3600)
  /// The most changes the change log keeps.
  public var changeLogMaximumRows: Int = 2_000_000
  /// How often the change log is pruned and unreferenced pictures are removed.
  public var maintenanceInterval: Duration = .seconds(60)
  /// How often the newest change is read even without a notification: the bound on how late
  /// a watcher hears of a change whose notification was lost (a reconnect).
  public var feedPollInterval: Duration = .seconds(1)
  /// Picture limits and thumbnail settings. Pictures live in the database (chunked rows), so
  /// every replica serves every picture; `directory` only holds uploads in progress.
  public var pictures: PictureConfiguration = PictureConfiguration()
  /// Bytes per stored picture chunk.
  public var pictureChunkBytes: Int = 256 * 1024
  /// Where uploads in progress are staged (local to this replica).
  public var scratchDirectory: String = FileManager.default.temporaryDirectory
    .appendingPathComponent("roster-uploads").path

  /// `maximumConnections` unless set: `roster serve --postgres-connections` shows it.
  public static let defaultMaximumConnections = 16
  /// `pointReads` unless set: `roster serve --postgres-point-reads` shows it.
  public static let defaultPointReads = 2

  /// Hot standbys that serve reads (`Standbys`), each as its own address (several hosts of one
  /// standby in one address, as for the primary). Empty: the primary serves every read.
  public var standbys: [PostgresURL] = []
  /// How long a read that names a change token waits for a standby to replay it before the
  /// next standby, then the primary, serves it.
  public var standbyReplayWait: Duration = .milliseconds(500)
  /// The furthest behind the primary a standby may be (its lag, read every
  /// `standbyLagInterval`) and still serve reads; nil for no limit.
  public var standbyMaximumLag: Duration? = .seconds(30)
  /// How often each standby's replay position and lag are read (`/metrics`).
  public var standbyLagInterval: Duration = .seconds(1)

  /// A configuration for the server at `url`.
  public init(url: PostgresURL) {
    self.url = url
  }
}
