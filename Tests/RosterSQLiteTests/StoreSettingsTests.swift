import GRDB
import RosterLocks
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

@Suite("Store settings", .timeLimit(.minutes(10)))
struct StoreSettingsTests {
  @Test("opens in WAL mode with foreign keys and the tuned pragmas")
  func pragmas() async throws {
    try await withTemporaryStore { store async throws in
      #expect(try store.pragma("journal_mode") == "wal")
      #expect(try store.pragma("foreign_keys") == "1")
      #expect(try store.pragma("cache_size") == "-\(store.configuration.effectiveCacheSizeKiB)")
      #expect(try store.pragma("mmap_size") == "\(store.configuration.mmapSize)")
      #expect(
        try store.pragma("journal_size_limit") == "\(store.configuration.journalSizeLimit)"
      )
      #expect(try store.pragma("busy_timeout") == "5000")
    }
  }

  @Test("the memory budget sizes every page cache and the picture cache, and bounds SQLite's heap")
  func memoryBudget() async throws {
    // 96 MiB by default: 3/8 shared by 8 readers and the writer, a quarter for pictures.
    try await withTemporaryStore { store async throws in
      #expect(store.configuration.memory.megabytes == 96)
      #expect(try store.pragma("cache_size") == "-\(96 * 1024 / 8 * 3 / 9)")
      #expect(store.configuration.effectivePictureCacheBytes == 24 * 1024 * 1024)
      #expect(try store.pragma("soft_heap_limit") == "\(72 * 1024 * 1024)")
    }
    // Without a budget, each cache keeps its own setting.
    try await withTemporaryStore(configure: { $0.memory = MemoryBudget(megabytes: nil) }) {
      store async throws in
      #expect(try store.pragma("cache_size") == "-\(store.configuration.cacheSizeKiB)")
      #expect(
        store.configuration.effectivePictureCacheBytes == store.configuration.pictures.cacheBytes
      )
    }
  }

  @Test("the writer journals bulk chunks in memory and everything else in a file")
  func tempStore() async throws {
    try await withTemporaryStore { store async throws in
      // PRAGMA temp_store: 1 is FILE, 2 is MEMORY.
      let place = { @Sendable (db: Database) in try Int.fetchOne(db, sql: "PRAGMA temp_store") }
      #expect(try await store.submit(bulk: true, place) == 2)
      #expect(try await store.submit(bulk: false, place) == 1)
      #expect(try await store.submit(bulk: true, place) == 2)
      #expect(try store.write(place) == 1)
      #expect(try store.read(place) == 2)
    }
  }

  @Test("the writer runs bulk chunks at a lower priority, and interactive writes at the usual one")
  func bulkPriority() async throws {
    try await withTemporaryStore { store async throws in
      let niceness = { @Sendable (_: Database) in StoreLane.currentNiceness() }
      #expect(try await store.submit(bulk: true, niceness) == 10)
      #expect(try await store.submit(bulk: false, niceness) == 0)
      #expect(try await store.submit(bulk: true, niceness) == 10)
      #expect(try await store.submit(bulk: false, niceness) == 0)
    }
  }

  @Test("the thread that answers for lower-priority threads runs at the usual priority")
  func answersPriority() async throws {
    try await withTemporaryStore { store async throws in
      // An upsert's rows are read on the bulk thread (nice 10), which hands its answer to
      // `SerialThread.answers`: were that thread started by it, it would inherit nice 10, and so
      // would every thread it starts.
      _ = try await store.upsertEmployees(ThreadRecordingRows(messages: []))
      let niceness = await withCheckedContinuation { continuation in
        SerialThread.answers.run { continuation.resume(returning: ThreadPriority.current) }
      }
      #expect(niceness == 0)
    }
  }

  @Test(
    "an upsert's rows are read on the bulk thread, below the usual priority, and the caller resumes at the usual one"
  )
  func bulkThread() async throws {
    try await withTemporaryStore { store async throws in
      let employee = makeEmployee(name: "Bulk Row")
      let rows = ThreadRecordingRows(messages: [
        [UpsertRow(guid: employee.guid, changes: EmployeeChanges(setting: employee))]
      ])
      let summary = try await store.upsertEmployees(rows)
      #expect(summary.inserted == 1)
      // Every next(), the one that ends the stream too: where gRPC decodes each message.
      let threads = rows.recorded
      #expect(threads.count == 2)
      for (name, niceness) in threads {
        #expect(name == "roster.bulk")
        #expect(niceness == 10)
      }
      #expect(StoreLane.currentNiceness() == 0)
      for _ in 0 ..< 20 {
        _ = try await store.upsertEmployees(ThreadRecordingRows(messages: []))
        #expect(StoreLane.currentNiceness() == 0)
      }
    }
  }

  @Test("employees have an integer primary key and a unique guid")
  func schema() async throws {
    try await withTemporaryStore(employees: 3) { store async throws in
      let duplicate = try store.read { db in
        try String.fetchOne(db, sql: "SELECT guid FROM employees LIMIT 1")
      }
      var employee = makeEmployee(name: "Copy")
      employee.guid = try #require(duplicate)
      #expect(throws: (any Error).self) {
        try store.write { db in
          try db.execute(
            sql: """
              INSERT INTO employees (guid, name, name_folded, department, start_date, update_time)
              VALUES (?, 'x', 'x', 'y', '2020-01-01', 0)
              """,
            arguments: [employee.guid]
          )
        }
      }
    }
  }
}

@Suite("Text folding", .timeLimit(.minutes(10)))
struct TextFoldingTests {
  @Test(
    "folds case and diacritics",
    arguments: [
      ("José Núñez", "jose nunez"), ("ZOË", "zoe"), ("Søren", "soren"), ("Ångel", "angel"),
      ("plain", "plain"), ("Łukasz", "lukasz"), ("Dvořák", "dvorak"), ("Straße", "strasse"),
    ]
  )
  func fold(input: String, expected: String) {
    #expect(TextFolding.fold(input) == expected)
  }

  @Test("escapes GLOB characters so they match themselves")
  func globEscaping() {
    #expect(TextFolding.containsPattern("a*b?[c]") == "*a[*]b[?][[]c[]]*")
  }
}

/// Fixed messages of rows that record the thread (name and nice value) of every `next()`.
final class ThreadRecordingRows: AsyncSequence, Sendable {
  private let messages: [[UpsertRow]]
  private let threads = Locked<[(String, Int32)]>([])

  init(messages: [[UpsertRow]]) {
    self.messages = messages
  }

  var recorded: [(String, Int32)] { self.threads.withLock { $0 } }

  struct AsyncIterator: AsyncIteratorProtocol {
    let owner: ThreadRecordingRows
    var index = 0

    mutating func next() async -> [UpsertRow]? {
      self.owner.threads.withLock {
        $0.append((StoreLane.currentThreadName(), StoreLane.currentNiceness()))
      }
      defer { self.index += 1 }
      return self.index < self.owner.messages.count ? self.owner.messages[self.index] : nil
    }
  }

  func makeAsyncIterator() -> AsyncIterator { AsyncIterator(owner: self) }
}
