import Foundation
import GRDB
import Logging
import Synchronization
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

@Suite("Point connections", .timeLimit(.minutes(10)))
struct PointReaderTests {
  static let nunez = makeEmployee(name: "José Núñez", department: "Design")

  /// The statements a store with `sqlDebug` logs.
  static func statements(_ log: CollectedLog) -> [String] {
    log.take().compactMap { $0.message == "sql" ? $0.metadata["sql"] : nil }
  }

  @Test("a point read runs its SELECT alone, without GRDB's PRAGMA schema_version")
  func selectAlone() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var configuration = StoreConfiguration(path: directory + "/test.sqlite")
    configuration.sqlDebug = true
    let log = CollectedLog()
    let store = try SQLiteStore(
      configuration: configuration,
      logger: Logger(label: "test") { _ in log }
    )
    _ = try await store.createEmployee(Self.nunez)
    // The first read opens the connection (its setup is logged too).
    _ = try await store.employee(guid: Self.nunez.guid, fields: .all)
    _ = log.take()
    for _ in 0 ..< 3 {
      let employee = try await store.employee(guid: Self.nunez.guid, fields: [.name])
      #expect(employee.name == "José Núñez")
    }
    let statements = Self.statements(log)
    #expect(statements.count == 3, "\(statements)")
    #expect(statements.allSatisfy { $0.hasPrefix("SELECT") }, "\(statements)")
    #expect(!statements.contains { $0.contains("schema_version") }, "\(statements)")
    #expect(store.pointReaders.opened == 1)
  }

  @Test("point reads see every commit at once, also after another connection changed the schema")
  func seesCommits() async throws {
    try await withTemporaryStore(extra: [Self.nunez]) { store async throws in
      #expect(try await store.employee(guid: Self.nunez.guid, fields: .all).department == "Design")
      try store.write { db in
        try db.execute(
          sql: "UPDATE employees SET department = 'Legal' WHERE guid = ?",
          arguments: [Self.nunez.guid]
        )
      }
      #expect(try await store.employee(guid: Self.nunez.guid, fields: .all).department == "Legal")
      // A schema change on the writer (as a bulk load's index rebuild): the point
      // connections' cached statements are prepared again.
      try store.write { db in
        try db.execute(
          sql: "CREATE INDEX point_reader_test ON employees(email); DROP INDEX point_reader_test"
        )
        try db.execute(sql: "ALTER TABLE employees ADD COLUMN point_reader_test INTEGER")
      }
      #expect(try await store.employee(guid: Self.nunez.guid, fields: .all).name == "José Núñez")
      try await store.deleteEmployee(guid: Self.nunez.guid)
      await #expect(throws: StoreError.self) {
        try await store.employee(guid: Self.nunez.guid, fields: .all)
      }
    }
  }

  @Test("when every point connection is busy, a read takes the pool instead of waiting")
  func fallsBackToThePool() async throws {
    try await withTemporaryStore(configure: { $0.pointReaderCount = 1 }) { store async throws in
      let (outer, inner) = try store.readStatement { db in
        (db.configuration.label, try store.readStatement { db in db.configuration.label })
      }
      #expect(outer == "roster.point")
      #expect(inner == "roster")
      #expect(store.pointReaders.opened == 1)
    }
    try await withTemporaryStore(configure: { $0.pointReaderCount = 0 }) { store async throws in
      #expect(try store.readStatement { db in db.configuration.label } == "roster")
      #expect(store.pointReaders.opened == 0)
    }
  }

  @Test("point connections are read-only and keep a small page cache")
  func readOnlySmallCache() async throws {
    try await withTemporaryStore { store async throws in
      let (readonly, cache) = try store.readStatement { db in
        (db.configuration.readonly, try String.fetchOne(db, sql: "PRAGMA cache_size"))
      }
      #expect(readonly)
      #expect(cache == "-\(store.configuration.pointReaderCacheKiB)")
      // With the default budget the readers get 4 MiB each; a point connection stays at 2.
      #expect(store.configuration.pointReaderCacheKiB == 2048)
      #expect(throws: DatabaseError.self) {
        try store.readStatement { db in try db.execute(sql: "DELETE FROM employees") }
      }
    }
  }
}
