internal import CoreMetrics
internal import RosterDomain

/// The store's metrics, through swift-metrics: whatever backend the process bootstraps
/// (`roster serve --metrics-port` uses Prometheus) records them, and without one they cost a
/// no-op call.
enum StoreMetrics {
  /// Time a write waited in the coalescing writer's queue before its transaction began.
  static let writerQueueWait = Timer(label: "roster_writer_queue_wait_seconds")
  /// Time a read waited for a reader connection.
  static let readerWait = Timer(label: "roster_reader_wait_seconds")
  /// Writes per coalesced transaction.
  static let batchSize = Recorder(label: "roster_write_batch_size", aggregate: true)
  /// Committed writer transactions.
  static let commits = Counter(label: "roster_commits_total")
  /// Background WAL checkpoints, and the WAL's size after the last one.
  static let checkpoints = Counter(label: "roster_wal_checkpoints_total")
  static let walBytes = Gauge(label: "roster_wal_bytes")
  /// The memory budget, and what its parts use: SQLite's whole heap (page caches included)
  /// and the picture cache.
  static let memoryBudget = Gauge(label: "roster_memory_budget_bytes")
  static let sqliteHeap = Gauge(label: "roster_sqlite_heap_bytes")
  static let pictureCacheBytes = Gauge(label: "roster_picture_cache_bytes")
}

extension Duration {
  /// The duration in whole nanoseconds, as the metrics' timers take it.
  var nanoseconds: Int64 {
    self.components.seconds * 1_000_000_000 + self.components.attoseconds / 1_000_000_000
  }
}
