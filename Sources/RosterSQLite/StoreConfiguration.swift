internal import RosterDomain
public import RosterPictures

/// How the store opens its database. Every knob has a default tuned for a 2-core server.
///
/// ```swift
/// var config = StoreConfiguration(path: "data/roster.sqlite")
/// config.cacheSizeKiB = 64 * 1024
/// let store = try SQLiteStore(configuration: config)
/// ```
public struct StoreConfiguration: Sendable {
  /// Path of the SQLite file. Its directory is created when missing.
  public var path: String
  /// Page cache per connection, in KiB (`PRAGMA cache_size = -N`).
  public var cacheSizeKiB: Int = 32 * 1024
  /// Bytes of the file mapped into memory for reads (`PRAGMA mmap_size`).
  public var mmapSize: Int = 256 * 1024 * 1024
  /// What an offline command (`roster import`, `roster copy`) maps of its file: its pages are
  /// read about once, and a mapping counts in the process's RSS as far as it was read.
  public static let offlineMmapSize = 64 << 20
  /// Size the WAL is truncated back to after a checkpoint (`PRAGMA journal_size_limit`).
  public var journalSizeLimit: Int = 64 * 1024 * 1024
  /// WAL pages after which a commit checkpoints by itself (`PRAGMA wal_autocheckpoint`).
  ///
  /// Large on purpose: the server's background checkpointer keeps the WAL short, off the
  /// request path, and this is only the backstop when nothing else checkpoints (offline loads).
  public var walAutoCheckpointPages: Int = 16_384
  /// How long a connection waits on a lock before failing, in seconds.
  public var busyTimeoutSeconds: Double = 5
  /// The most reader connections open at once.
  public var maximumReaderCount: Int = 8
  /// Read-only connections kept for reads of one SELECT (point reads), beside the
  /// `maximumReaderCount` readers; opened on first use, each with `pointReaderCacheKiB` of
  /// page cache. 0 reads everything through the pool.
  public var pointReaderCount: Int = 4
  /// Logs every statement with its duration when true (the SQLDebug of Core Data).
  public var sqlDebug: Bool = false
  /// How hard a commit waits for the disk. `.full`, the default, survives power loss.
  public var synchronous: Synchronous = .full
  /// How the single writer groups requests into transactions.
  public var writer: WriterConfiguration = WriterConfiguration()
  /// How long the change log keeps its history.
  public var changeLogRetention: ChangeLogRetention = ChangeLogRetention()
  /// How often the WAL is checkpointed in the background, when something was written.
  public var checkpointInterval: Duration = .milliseconds(500)
  /// How often the change log is pruned to its retention policy (and stray picture files
  /// swept).
  public var pruneInterval: Duration = .seconds(60)
  /// Where full pictures live, and how they are checked, thumbnailed and cached.
  public var pictures: PictureConfiguration = PictureConfiguration()
  /// The lane for point reads and cheap reads bounded by a page.
  public var interactiveLane = LaneConfiguration(width: 2, queueLimit: 1024)
  /// The lane for reads whose cost grows with the data: searches, counts with a name filter,
  /// grouped aggregates, calendars. In the background class (SCHED_IDLE, nice 19): it runs when
  /// nothing else wants the CPU, so cheap calls beside it keep their latency (docs/performance.md,
  /// "Robust"), and each query stops after 30 s.
  public var heavyLane = LaneConfiguration(
    width: HeavyReadDefaults.width,
    queueLimit: HeavyReadDefaults.queueLimit,
    niceness: 19,
    budget: .seconds(30)
  )
  /// The most sales one page of medians reads, unless one group holds more: the page ends at
  /// a group boundary with fewer groups than asked, so a page's time stays bounded
  /// (docs/performance.md, "Reads as a client sees them"). 0 means no limit: a page holds as many
  /// groups as asked.
  public var medianRowsPerPage: Int64 = 500_000
  /// The time a page of department medians from the amount buckets may take before it ends
  /// early (`MedianPageClock`); tests shorten it.
  public var medianPageBudget: Duration = AmountBuckets.pageBudget
  /// The process-wide memory budget that SQLite's heap, every connection's page cache and
  /// the picture cache share.
  public var memory = MemoryBudget()

  /// The page cache of each connection, in KiB: `cacheSizeKiB`, or the budget's share.
  public var effectiveCacheSizeKiB: Int {
    guard let share = self.memory.pageCacheBytes(connections: self.maximumReaderCount + 1) else {
      return self.cacheSizeKiB
    }
    return max(256, min(self.cacheSizeKiB, share / 1024))
  }

  /// The page cache of each point connection, in KiB: the readers' cache, at most 2 MiB. A
  /// point read touches a handful of pages, most through the memory map; the memory budget's
  /// page-cache share stays the pool's (SQLite's soft heap limit covers these too).
  public var pointReaderCacheKiB: Int {
    min(self.effectiveCacheSizeKiB, 2048)
  }

  /// The picture cache's size: `pictures.cacheBytes`, or the budget's share.
  public var effectivePictureCacheBytes: Int {
    guard let share = self.memory.pictureCacheBytes else { return self.pictures.cacheBytes }
    return min(self.pictures.cacheBytes, share)
  }

  /// The directory of large picture files: `pictures.directory`, or `<path>-pictures`.
  public var picturesDirectory: String {
    self.pictures.directory ?? self.path + "-pictures"
  }

  /// Creates a configuration for the database at `path`.
  public init(path: String) {
    self.path = path
  }

  /// `PRAGMA synchronous`: when a commit is acknowledged relative to the disk.
  public enum Synchronous: String, Sendable, CaseIterable {
    /// No fsync: a crash of the OS or a power loss can lose acknowledged writes.
    case off
    /// fsync at checkpoints only: survives a process crash, not a power loss.
    case normal
    /// fsync of the WAL at every commit: survives a power loss.
    case full
  }
}

/// How much memory the store may use, and how it is shared.
///
/// SQLite's whole heap (page caches, sorters, statements) is held under three quarters of
/// the budget by its soft heap limit, which is process-wide; the page caches of all
/// connections together get three eighths, and the picture cache a quarter. Memory-mapped
/// database pages are file-backed and not counted.
public struct MemoryBudget: Sendable, Hashable {
  /// The budget in MiB; nil for none (each cache keeps its own setting).
  public var megabytes: Int?

  /// Creates a budget of `megabytes` MiB; 96 by default.
  public init(megabytes: Int? = 96) {
    self.megabytes = megabytes
  }

  private var bytes: Int? { self.megabytes.map { $0 * 1024 * 1024 } }

  /// SQLite's soft heap limit, in bytes.
  public var sqliteHeapBytes: Int? { self.bytes.map { $0 / 4 * 3 } }

  /// Each connection's page cache, when `connections` share three eighths of the budget.
  public func pageCacheBytes(connections: Int) -> Int? {
    self.bytes.map { $0 / 8 * 3 / max(1, connections) }
  }

  /// The picture cache's share.
  public var pictureCacheBytes: Int? { self.bytes.map { $0 / 4 } }
}

/// How the single writer groups write requests into transactions (group commit).
public struct WriterConfiguration: Sendable {
  /// How long the writer waits for more requests before it starts a transaction that is not
  /// yet full. Requests that arrive while a commit is in flight always join the next one, so
  /// the server waits for none (zero; a window measured slower, docs/performance.md, "Writes"); tests
  /// set one so that concurrent requests are sure to share a commit.
  public var window: Duration = .zero
  /// The most requests that share one transaction, so no batch holds the writer for long;
  /// 1 has every request commit alone (the baseline the coalescing benchmark compares against).
  public var maximumBatch: Int = 256
  /// The most requests waiting for the writer; more are refused with `resourceExhausted`.
  public var maximumPending: Int = 16_384
  /// Rows per chunk of a bulk upsert. Each chunk is one request to the writer: big enough to
  /// amortise a commit, small enough that an interactive write never waits long behind it.
  public var bulkChunkRows: Int = 2_000
  /// The writer thread's nice value while it runs a bulk chunk, so interactive reads and
  /// writes get the CPU first; 0 runs bulk work at the usual priority.
  public var bulkNiceness: Int32 = 10

  /// Creates the default writer configuration.
  public init() {}
}

/// How long the change log keeps history; whichever limit is reached first prunes.
public struct ChangeLogRetention: Sendable {
  /// Changes older than this are pruned.
  public var maximumAge: Duration = .seconds(7 * 24 * 3600)
  /// At most this many of the newest changes are kept.
  public var maximumRows: Int = 2_000_000

  /// Creates a retention policy.
  public init(maximumAge: Duration = .seconds(7 * 24 * 3600), maximumRows: Int = 2_000_000) {
    self.maximumAge = maximumAge
    self.maximumRows = maximumRows
  }
}
