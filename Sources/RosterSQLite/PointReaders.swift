internal import GRDB
internal import RosterLocks

/// Read-only connections for reads of one SELECT, kept beside GRDB's reader pool.
///
/// Every read through `DatabasePool` first takes a reader from the pool under a dispatch
/// barrier and then runs `PRAGMA schema_version` in a transaction of its own, so it can drop
/// cached schema information when another connection changed the schema. For a point read
/// those two cost about as much as the SELECT itself, when measured. A `DatabaseQueue` runs the
/// statement directly; SQLite itself
/// re-prepares a cached statement whose schema changed (`SQLITE_SCHEMA`), and the SELECTs
/// read here use no schema information cached by GRDB.
///
/// The connections open on first use, up to `capacity`; when all are busy, a read takes the
/// pool's path, so this never waits. An idle connection holds no transaction and no lock;
/// the connections close with the store (GRDB closes a queue when it is released).
///
/// ```swift
/// let readers = PointReaders(path: path, configuration: readerConfiguration, capacity: 4, cacheKiB: 2048)
/// let count = try readers.read(otherwise: pool) { db in try Int.fetchOne(db, sql: "SELECT 1") }
/// ```
final class PointReaders: Sendable {
  private let path: String
  private let configuration: Configuration
  private let capacity: Int
  private struct State {
    var idle: [DatabaseQueue] = []
    var opened = 0
  }
  private let state = Locked(State())

  /// Up to `capacity` connections to `path`, opened with `configuration` made read-only and
  /// a page cache of at most `cacheKiB` each.
  init(path: String, configuration: Configuration, capacity: Int, cacheKiB: Int) {
    var configuration = configuration
    configuration.readonly = true
    configuration.label = (configuration.label ?? "roster") + ".point"
    configuration.prepareDatabase { db in
      try db.execute(sql: "PRAGMA cache_size = -\(cacheKiB)")
    }
    self.path = path
    self.configuration = configuration
    self.capacity = max(0, capacity)
  }

  /// How many connections are open.
  var opened: Int { self.state.withLock { $0.opened } }

  /// Runs `body`, which must run exactly one SELECT, on an idle point connection; on
  /// `pool` when none is free (or none could be opened).
  func read<T>(otherwise pool: DatabasePool, _ body: (Database) throws -> T) throws -> T {
    guard let reader = self.take() else { return try pool.unsafeRead(body) }
    defer { self.give(reader) }
    return try reader.unsafeRead(body)
  }

  private func take() -> DatabaseQueue? {
    enum Taken {
      case reader(DatabaseQueue)
      case open, none
    }
    let taken: Taken = self.state.withLock { state in
      if let reader = state.idle.popLast() { return .reader(reader) }
      guard state.opened < self.capacity else { return .none }
      state.opened += 1
      return .open
    }
    switch taken {
    case .reader(let reader): return reader
    case .none: return nil
    case .open:
      do {
        return try DatabaseQueue(path: self.path, configuration: self.configuration)
      } catch {
        // The pool serves instead; a later read may try again.
        self.state.withLock { $0.opened -= 1 }
        return nil
      }
    }
  }

  private func give(_ reader: DatabaseQueue) {
    self.state.withLock { $0.idle.append(reader) }
  }
}
