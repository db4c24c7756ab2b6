import Foundation
import GRDB
import RosterSeed
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

@Suite("Import and demo data", .timeLimit(.minutes(10)))
struct ImportTests {
  @Test("invalid rows are reported by index and reason, valid ones still land")
  func rejections() async throws {
    var badGuid = makeEmployee(name: "Bad Guid")
    badGuid.guid = "not-a-guid"
    let badDate = makeEmployee(name: "Bad Date", startDate: "2023-02-30")
    var negative = makeEmployee(name: "Negative")
    negative.vacationDays = -1
    let empty = makeEmployee(name: "  ")
    let good = makeEmployee(name: "Good One")
    try await withTemporaryStore { store async throws in
      let summary = try await store.importEmployees([badGuid, good, badDate, negative, empty])
      #expect(summary.imported == 1)
      #expect(summary.rejected.map(\.index) == [0, 2, 3, 4])
      #expect(summary.rejected[0].reason.contains("guid"))
      #expect(summary.rejected[1].reason.contains("start_date"))
      #expect(summary.rejected[2].reason.contains("vacation_days"))
      #expect(summary.rejected[3].reason.contains("name"))
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 1)
    }
  }

  @Test("importing an existing guid merges instead of duplicating")
  func merge() async throws {
    var employee = makeEmployee(name: "First Name", guid: "AAAAAAAA-0000-4000-8000-000000000001")
    try await withTemporaryStore(extra: [employee]) { store async throws in
      employee.name = "Second Name"
      _ = try await store.importEmployees([employee])
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 1)
      let stored = try await store.employee(guid: employee.guid.lowercased(), fields: .all)
      #expect(stored.name == "Second Name")
      #expect(try await store.countEmployees(filter: EmployeeFilter(nameContains: "first")) == 0)
      #expect(try await store.countEmployees(filter: EmployeeFilter(nameContains: "second")) == 1)
    }
  }

  @Test("a bulk load into an empty table restores every index, trigger and the search index")
  func bulkLoad() async throws {
    try await withTemporaryStore { store async throws in
      let schema =
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'employees' ORDER BY name"
      let before = try store.read { db in try Row.fetchAll(db, sql: schema) }
      let summary = try await store.withBulkLoad {
        let during = try store.read { db in
          try Int.fetchOne(
            db,
            sql:
              "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'employees'"
          )
        }
        #expect(during == 0, "the employees' triggers are dropped while loading")
        return try await store.importEmployees(
          DemoData(count: 500).lazy.map(\.employee) + [makeEmployee(name: "José Núñez")]
        )
      }
      #expect(summary.imported == 501)
      #expect(
        try await store.departmentCounts().map(\.headcount).reduce(0, +) == 501,
        "the department counters are counted once after the load"
      )
      #expect(try store.read { db in try Row.fetchAll(db, sql: schema) } == before)
      #expect(try await store.countEmployees(filter: EmployeeFilter(nameContains: "NUÑEZ")) >= 1)
      // Triggers work again: a later import is indexed for search at once.
      _ = try await store.importEmployees([makeEmployee(name: "Quintessa Unique")])
      #expect(
        try await store.countEmployees(filter: EmployeeFilter(nameContains: "quintessa")) == 1
      )
      let integrity = try store.read { db in
        try String.fetchOne(db, sql: "PRAGMA integrity_check")
      }
      #expect(integrity == "ok")
    }
  }

  @Test("a bulk load that dies midway is finished when the store next opens")
  func bulkLoadCrashRecovery() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/crash.sqlite"
    let schema =
      "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'employees' ORDER BY name"
    let before: [Row]
    do {
      let store = try SQLiteStore(configuration: StoreConfiguration(path: path))
      before = try store.read { db in try Row.fetchAll(db, sql: schema) }
      #expect(try store.beginBulkLoad())
      _ = try await store.importEmployees([makeEmployee(name: "Zoë Crash")])
      // The process "dies" here: no finishBulkLoad.
      let during = try store.read { db in try Row.fetchAll(db, sql: schema) }
      #expect(during.count < before.count)
    }
    let reopened = try SQLiteStore(configuration: StoreConfiguration(path: path))
    // The schema as it was before the load: every index and trigger the load dropped is back.
    let after = try reopened.read { db in try Row.fetchAll(db, sql: schema) }
    #expect(after == before, "the employees' indexes and triggers after the reopening")
    #expect(try await reopened.countEmployees(filter: EmployeeFilter(nameContains: "zoe")) == 1)
    let pending = try reopened.read { db in
      try Int.fetchOne(db, sql: "SELECT count(*) FROM bulk_load_pending")
    }
    #expect(pending == 0)
    // The load is logged as one gap past the log's end (its row, logged outside
    // `withBulkLoad`, and the gap), from which a watcher that starts now follows on.
    #expect(reopened.latestChange == 2)
    #expect(try await reopened.changes(after: reopened.latestChange, limit: 10).isEmpty)
  }

  @Test("a bulk load whose body fails still rebuilds, and rethrows")
  func bulkLoadFailure() async throws {
    struct Boom: Error {}
    try await withTemporaryStore { store async throws in
      await #expect(throws: Boom.self) {
        try await store.withBulkLoad {
          _ = try await store.importEmployees([makeEmployee(name: "Half Way")])
          throw Boom()
        }
      }
      #expect(try await store.countEmployees(filter: EmployeeFilter(nameContains: "half")) == 1)
      let triggers = try store.read { db in
        try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'")
      }
      #expect(
        triggers == 23,
        """
        names 4 and their trigram index 2, picture release 2, department counters 3, sales rollups 4, daily \
        statistics 4, amount buckets 4
        """
      )
    }
  }

  @Test("a bulk load into a non-empty table keeps its indexes")
  func bulkLoadNonEmpty() async throws {
    try await withTemporaryStore(employees: 5) { store async throws in
      try await store.withBulkLoad {
        let indexes = try store.read { db in
          try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'index'")
        }
        #expect(indexes ?? 0 >= 10)
      }
    }
  }

  @Test("demo data is deterministic, valid, and has accented names")
  func demoData() throws {
    let first = Array(DemoData(count: 300))
    let second = Array(DemoData(count: 300))
    #expect(first == second)
    #expect(Set(first.map(\.employee.guid)).count == 300)
    #expect(first.contains { $0.employee.name.unicodeScalars.contains { $0.value > 0x7F } })
    for record in first {
      #expect(throws: Never.self) { try EmployeeValidation.validated(record.employee) }
    }
    #expect(Array(DemoData(count: 5, seed: 1)) != Array(DemoData(count: 5, seed: 2)))
  }

  @Test("the seed file round-trips, escapes included, in the sample's key shape")
  func seedFileRoundTrip() throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var records = Array(DemoData(count: 50))
    records[0].employee.about = "Quote \" backslash \\ newline \n tab \t bell \u{7} done"
    records[1].picture = "a.jpg"
    let path = directory + "/seed.json"
    try SeedFile.write(records, to: path)
    #expect(try SeedFile.readAll(path) == records)

    let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
    let objects = try #require(json as? [[String: Any]])
    #expect(objects.count == 50)
    #expect(
      Set(objects[0].keys) == [
        "guid", "active", "picture", "name", "vacationDays", "department", "startDate", "email",
        "phone", "address", "about",
      ]
    )
  }

  @Test("the seed reader accepts pretty-printed JSON with unicode escapes and unknown keys")
  func seedReaderLeniency() throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/sample.json"
    let text = """
      [
        {
          "guid" : "6A2D2A7D-4A5F-4E2B-9C3E-4C2B1B6D8E11",
          "active" : true,
          "picture" : "face.jpg",
          "name" : "Jos\\u00e9 N\\u00fa\\u00f1ez \\ud83d\\ude00",
          "vacationDays" : 12,
          "department" : "Legal",
          "startDate" : "2019-03-04",
          "extra" : {"nested": [1, 2, {"x": "]"}]},
          "email" : "jose@example.com",
          "phone" : "(555) 000-1111",
          "address" : "1 Main Street",
          "about" : "Hi."
        }
      ]
      """
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    let records = try SeedFile.readAll(path)
    #expect(records.count == 1)
    #expect(records[0].employee.name == "José Núñez 😀")
    #expect(records[0].employee.vacationDays == 12)
    #expect(records[0].picture == "face.jpg")
    #expect(records[0].employee.about == "Hi.")

    try "[{\"guid\": \"x\",}".write(toFile: path, atomically: true, encoding: .utf8)
    #expect(throws: StoreError.self) { try SeedFile.readAll(path) }
  }
}
