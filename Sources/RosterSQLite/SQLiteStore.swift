internal import Foundation
internal import GRDB
internal import GRDBSQLite
public import Logging
internal import RosterDomain
public import RosterPictures
public import RosterStore
internal import Tracing

/// The one store every service shares: a WAL-mode SQLite database behind a GRDB pool.
///
/// Reads run on reader connections on threads the store owns, in two lanes: cheap
/// interactive reads, and heavy work (searches, aggregates, calendars) at a lower priority
/// with bounded concurrency and queue. A cancelled call or a passed deadline interrupts its
/// statement. Point reads may run inline in the caller (`StoreConfiguration.pointReads`).
/// Writes go through the single writer connection.
///
/// ```swift
/// let store = try SQLiteStore(configuration: StoreConfiguration(path: "data/roster.sqlite"))
/// let employee = try await store.employee(guid: guid, fields: .all)
/// ```
public struct SQLiteStore: Sendable {
  let pool: DatabasePool
  /// Read-only connections for reads of one SELECT (`readStatement`), outside the pool's
  /// per-read overhead.
  let pointReaders: PointReaders
  let writer: WriteCoalescer
  let feed: ChangeFeed
  /// A connection of its own for WAL checkpoints, so they never wait in the writer's queue
  /// nor hold up a commit.
  let checkpointer: DatabaseQueue
  /// The configuration the store was opened with.
  public let configuration: StoreConfiguration
  let logger: Logger
  /// Picture files, uploads and the picture cache; the rows are this store's.
  let pictures: PictureStorage
  let calendarCache = CalendarCache()
  let nameCount = NameCount()
  /// Cheap reads whose cost is bounded by a page.
  let interactive: StoreLane
  /// Reads whose cost grows with the data.
  let heavy: StoreLane
  /// Decoding and checking of bulk streams, below the usual priority.
  let bulk: BulkExecutor

  /// Opens (creating if needed) the database and brings its schema up to date.
  public init(
    configuration: StoreConfiguration,
    logger: Logger = Logger(label: "roster.store")
  ) throws {
    self.configuration = configuration
    self.logger = logger
    self.pictures = try PictureStorage(
      configuration: configuration.pictures,
      directory: configuration.picturesDirectory,
      cacheBytes: configuration.effectivePictureCacheBytes,
      logger: logger
    )
    self.interactive = StoreLane(name: "interactive", configuration: configuration.interactiveLane)
    self.heavy = StoreLane(name: "heavy", configuration: configuration.heavyLane)
    self.bulk = BulkExecutor(niceness: configuration.writer.bulkNiceness)
    // Started here, at the opener's priority, before a lower-priority thread needs it.
    SerialThread.answers.start()
    if let limit = configuration.memory.sqliteHeapBytes {
      // Process-wide: SQLite frees cache pages to stay under it (a soft limit).
      sqlite3_soft_heap_limit64(Int64(limit))
    }
    let directory = URL(fileURLWithPath: configuration.path).deletingLastPathComponent()
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let grdbConfiguration = Self.grdbConfiguration(configuration, logger: logger)
    let pool = try DatabasePool(path: configuration.path, configuration: grdbConfiguration)
    // GRDB sets `synchronous = NORMAL` on the writer when it turns WAL on, after the
    // connection's own setup: without this the writer never flushed a commit, whatever
    // `synchronous` said (readers keep the setup's value, which hid it).
    try pool.writeWithoutTransaction { db in
      try db.execute(sql: "PRAGMA synchronous = \(configuration.synchronous.rawValue.uppercased())")
    }
    try Self.migrator.migrate(pool)
    let feed = ChangeFeed(latest: try pool.read(Self.lastSequence))
    self.pool = pool
    self.pointReaders = PointReaders(
      path: configuration.path,
      configuration: grdbConfiguration,
      capacity: configuration.pointReaderCount,
      cacheKiB: configuration.pointReaderCacheKiB
    )
    self.feed = feed
    var checkpointConfiguration = Configuration()
    checkpointConfiguration.busyMode = .timeout(configuration.busyTimeoutSeconds)
    checkpointConfiguration.label = "roster.checkpoint"
    self.checkpointer = try DatabaseQueue(
      path: configuration.path,
      configuration: checkpointConfiguration
    )
    self.writer = WriteCoalescer(pool: pool, configuration: configuration.writer) { db in
      if let latest = try? Self.lastSequence(db) { feed.publish(latest) }
    }
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
      // Readers sort in memory; the writer's setting is `WriteCoalescer.tempStore`'s.
      let tempStore = db.configuration.readonly ? "MEMORY" : WriteCoalescer.tempStore.usual
      try db.execute(
        sql: """
          PRAGMA cache_size = -\(settings.effectiveCacheSizeKiB);
          PRAGMA mmap_size = \(settings.mmapSize);
          PRAGMA journal_size_limit = \(settings.journalSizeLimit);
          PRAGMA busy_timeout = \(Int(settings.busyTimeoutSeconds * 1000));
          PRAGMA temp_store = \(tempStore);
          PRAGMA synchronous = \(settings.synchronous.rawValue.uppercased());
          PRAGMA wal_autocheckpoint = \(settings.walAutoCheckpointPages);
          """
      )
      Self.addAggregates(db)
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
    let requested = ContinuousClock.now
    return try self.pool.read { db in
      Self.recordReaderWait(since: requested)
      return try body(db)
    }
  }

  private static func recordReaderWait(since requested: ContinuousClock.Instant) {
    let wait = ContinuousClock.now - requested
    StoreMetrics.readerWait.recordNanoseconds(wait.nanoseconds)
  }

  /// Which lane a read runs in.
  enum ReadKind {
    /// A read of a few rows by key, or one bounded by a page: the interactive lane.
    case interactive
    /// A read whose cost grows with the data: the heavy lane.
    case heavy
  }

  /// Runs `body` on a reader connection in the lane for `kind`, inside one read transaction
  /// (or none when `statement` says it runs one SELECT), with the statement interrupted when
  /// the call is cancelled, its deadline passes or the lane's budget runs out.
  func read<T: Sendable>(
    _ kind: ReadKind,
    statement: Bool = false,
    _ body: @escaping @Sendable (Database) throws -> T
  ) async throws -> T {
    let lane: StoreLane
    let traced = StoreTracing.context
    switch kind {
    case .interactive: lane = self.interactive
    case .heavy: lane = self.heavy
    }
    let queued = traced.map { _ in StoreTracing.now }
    return try await lane.run { job in
      // The wait for the lane, then the read, as children of the call's span.
      var span: (any Span)? = nil
      if let traced, let queued {
        StoreTracing.record(
          kind == .heavy ? "sqlite.heavy_lane.wait" : "sqlite.lane.wait",
          context: traced,
          from: queued
        )
        span = StoreTracing.start("sqlite.read", context: traced)
      }
      defer { span?.end() }
      let run: (Database) throws -> T = { db in
        try Self.interruptible(db, job) { try body(db) }
      }
      return try statement ? self.readStatement(run) : self.read(run)
    }
  }

  /// A point read on the calling thread: the call's control checked first; when the call is
  /// traced, the read a span of its (after its wait for the lane, from `wait`, when it had one).
  func readNow<T>(
    statement: Bool,
    wait queued: DefaultTracerClock.Instant? = nil,
    _ body: (Database) throws -> T
  ) throws -> T {
    try CallControl.check(CallControl.current)
    var span: (any Span)? = nil
    if let traced = StoreTracing.context {
      if let queued { StoreTracing.record("sqlite.lane.wait", context: traced, from: queued) }
      span = StoreTracing.start("sqlite.read", context: traced)
    }
    defer { span?.end() }
    return try statement ? self.readStatement(body) : self.read(body)
  }

  /// Runs `body` with SQLite's progress handler polling `job.progress()`, so a long statement
  /// stops within microseconds of its call's end (and a background lane's yields the CPU).
  static func interruptible<T>(_ db: Database, _ job: LaneJob, _ body: () throws -> T) throws -> T {
    if job.shouldStop, let error = job.stopError { throw error }
    let connection = db.sqliteConnection
    sqlite3_progress_handler(
      connection,
      Self.progressInterval,
      { context in
        guard let context else { return 0 }
        return Unmanaged<LaneJob>.fromOpaque(context).takeUnretainedValue().progress() ? 1 : 0
      },
      Unmanaged.passUnretained(job).toOpaque()
    )
    defer { sqlite3_progress_handler(connection, 0, nil, nil) }
    return try body()
  }

  /// SQLite virtual-machine steps between two checks of a job's cancellation and deadline:
  /// a few microseconds of work.
  static let progressInterval: Int32 = 1000

  /// The lanes' counters.
  public var laneStatistics: (interactive: LaneStatistics, heavy: LaneStatistics) {
    (self.interactive.statistics, self.heavy.statistics)
  }

  /// Like `read`, but without BEGIN and COMMIT around `body`: for a body that runs exactly
  /// one SELECT, which SQLite already reads from one consistent snapshot. The transaction
  /// statements cost more than a point read itself. It runs on a point connection
  /// (`PointReaders`) when one is free, else on the pool's.
  func readStatement<T>(_ body: (Database) throws -> T) throws -> T {
    let requested = ContinuousClock.now
    return try self.pointReaders.read(otherwise: self.pool) { db in
      Self.recordReaderWait(since: requested)
      return try body(db)
    }
  }

  /// Runs `body` in one write transaction on the writer connection, bypassing the
  /// coalescing writer: for schema work (bulk-load index rebuilds) and maintenance only.
  /// Every data write goes through `submit`.
  func write<T>(_ body: (Database) throws -> T) throws -> T {
    try self.pool.write(body)
  }

  /// Runs `body` through the coalescing writer, inside its own savepoint of a shared
  /// transaction, and returns after the commit. See `WriteCoalescer`. The call's change token
  /// is the feed's end then: the writer published its commit before answering.
  func submit<T: Sendable>(
    bulk: Bool = false,
    _ body: @escaping @Sendable (Database) throws -> T
  ) async throws -> T {
    let value = try await self.coalesced(bulk: bulk, body)
    CallControl.current?.wrote(through: self.feed.latest)
    return value
  }

  private func coalesced<T: Sendable>(
    bulk: Bool,
    _ body: @escaping @Sendable (Database) throws -> T
  ) async throws -> T {
    do {
      guard let traced = StoreTracing.context else {
        return try await self.writer.submit(bulk: bulk, body)
      }
      // The wait for the writer, the write's statements, then the wait for the commit it
      // shares with the writes coalesced with it.
      let queued = StoreTracing.now
      let (value, wrote) = try await self.writer.submit(bulk: bulk) {
        db -> (T, DefaultTracerClock.Instant) in
        StoreTracing.record("sqlite.writer.wait", context: traced, from: queued)
        let span = StoreTracing.start("sqlite.write", context: traced)
        defer { span.end() }
        return (try body(db), StoreTracing.now)
      }
      StoreTracing.record("sqlite.commit", context: traced, from: wrote)
      return value
    } catch let error as DatabaseError {
      guard let fault = Self.diskFault(error) else { throw error }
      fault.record()
      self.logger.error("a write failed on the disk", metadata: ["error": "\(error)"])
      throw fault.storeError
    }
  }

  /// What SQLite said about a write the disk refused, if that is what happened: full, or an
  /// I/O error. Other errors are the caller's to map.
  static func diskFault(_ error: DatabaseError) -> DiskFault? {
    switch error.resultCode {
    case .SQLITE_FULL:
      return DiskFault(operation: "database commit", full: true, detail: "database or disk is full")
    case .SQLITE_IOERR:
      return DiskFault(
        operation: "database write",
        full: false,
        detail: error.message ?? "disk I/O error"
      )
    default:
      return nil
    }
  }

  /// The writer's counters: commits, writes, the largest shared transaction.
  public var writerStatistics: WriterStatistics {
    self.writer.statistics
  }

  /// Copies committed WAL pages into the database file on a connection of its own, off the
  /// request path. A PASSIVE checkpoint (the default) never blocks writers or readers; pages
  /// a reader still needs stay in the WAL until a later checkpoint. A TRUNCATE checkpoint,
  /// for shutdown, waits for readers and then empties the WAL file.
  ///
  /// - Returns: the WAL's size in pages, and how many of them are now in the database file.
  @discardableResult
  public func checkpoint(truncate: Bool = false) async throws -> (walPages: Int, checkpointed: Int)
  {
    let mode = truncate ? "TRUNCATE" : "PASSIVE"
    let niceness = self.configuration.writer.bulkNiceness
    let result = try await self.checkpointer.writeWithoutTransaction { db in
      // Background work: at the bulk priority, so reads keep the CPU while a bulk load's
      // pages are copied back (the writer's own autocheckpoint bounds the WAL if this lags).
      var priority = PriorityScope(lowerTo: truncate ? 0 : niceness)
      defer { priority.restore() }
      let row = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(\(mode))")
      return (walPages: (row?[1] as Int?) ?? 0, checkpointed: (row?[2] as Int?) ?? 0)
    }
    let attributes = try? FileManager.default.attributesOfItem(
      atPath: self.configuration.path + "-wal"
    )
    StoreMetrics.walBytes.record((attributes?[.size] as? Int) ?? 0)
    // Counted after the size is recorded: whoever sees a checkpoint on /metrics sees the WAL's
    // size too (the interop suite scraped between the two once).
    StoreMetrics.checkpoints.increment()
    return result
  }

  /// What the memory budget's parts use now: SQLite's heap (every connection's page cache,
  /// statements and sorters) and the picture cache, in bytes.
  public var memoryUse: (sqliteHeap: Int, pictureCache: Int) {
    (Int(sqlite3_memory_used()), self.pictures.cache.heldBytes)
  }

  /// Records the memory budget and its use as metrics (`roster_memory_budget_bytes`,
  /// `roster_sqlite_heap_bytes`, `roster_picture_cache_bytes`).
  public func recordMemoryMetrics() {
    let use = self.memoryUse
    StoreMetrics.memoryBudget.record((self.configuration.memory.megabytes ?? 0) * 1024 * 1024)
    StoreMetrics.sqliteHeap.record(use.sqliteHeap)
    StoreMetrics.pictureCacheBytes.record(use.pictureCache)
  }

  /// The value of a PRAGMA on a reader connection, for checks and diagnostics.
  public func pragma(_ name: String) throws -> String? {
    try self.read { (db: Database) in try String.fetchOne(db, sql: "PRAGMA \(name)") }
  }

  /// The value of `PRAGMA name` on the writer connection, which commits every write.
  func writerPragma(_ name: String) throws -> String? {
    try self.pool.writeWithoutTransaction { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
  }
}

extension SQLiteStore: PictureCatalog {}
