import Foundation
import GRDB
import RosterSeed
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// The coalescing writer: shared commits, savepoint isolation, and the change log.
@Suite("Writer", .timeLimit(.minutes(10)))
struct WriterTests {
  /// A writer that waits long enough for every concurrent request to join one commit.
  static func patient(_ configuration: inout StoreConfiguration) {
    configuration.writer.window = .milliseconds(200)
    configuration.writer.maximumBatch = 64
  }

  @Test("concurrent writers share commits, counted by the writer")
  func coalescing() async throws {
    try await withTemporaryStore(employees: 64, configure: Self.patient) { store async throws in
      let guids = DemoData(count: 64).map(\.employee.guid)
      let before = store.writerStatistics
      try await withThrowingTaskGroup(of: Void.self) { group in
        for (offset, guid) in guids.enumerated() {
          group.addTask {
            var changes = EmployeeChanges()
            changes.vacationDays = 100 + offset
            _ = try await store.updateEmployee(guid: guid, changes: changes)
          }
        }
        try await group.waitForAll()
      }
      let after = store.writerStatistics
      #expect(after.writes - before.writes == 64)
      #expect(after.commits - before.commits < 64, "64 writes should share commits")
      #expect(after.largestBatch > 1)
      for (offset, guid) in guids.enumerated() {
        #expect(
          try await store.employee(guid: guid, fields: .vacationDays).vacationDays == 100 + offset
        )
      }
    }
  }

  @Test("with batches of one, every write commits alone")
  func noCoalescing() async throws {
    try await withTemporaryStore(employees: 16, configure: { $0.writer.maximumBatch = 1 }) {
      store async throws in
      let guids = DemoData(count: 16).map(\.employee.guid)
      let before = store.writerStatistics
      try await withThrowingTaskGroup(of: Void.self) { group in
        for guid in guids {
          group.addTask {
            var changes = EmployeeChanges()
            changes.active = false
            _ = try await store.updateEmployee(guid: guid, changes: changes)
          }
        }
        try await group.waitForAll()
      }
      let after = store.writerStatistics
      #expect(after.writes - before.writes == 16)
      #expect(after.commits - before.commits == 16)
      #expect(after.largestBatch == 1)
    }
  }

  @Test("a failing request in a shared commit fails alone")
  func failingNeighbour() async throws {
    try await withTemporaryStore(employees: 8, configure: Self.patient) { store async throws in
      let guids = DemoData(count: 8).map(\.employee.guid)
      let taken = guids[0]
      let before = store.writerStatistics
      let changesBefore = store.latestChange
      let results = await withTaskGroup(of: (Int, Bool).self) { group in
        for index in 0 ..< 8 {
          group.addTask {
            do {
              if index == 3 {
                // A duplicate guid: fails after its savepoint began.
                _ = try await store.createEmployee(makeEmployee(name: "Dup", guid: taken))
              } else {
                var changes = EmployeeChanges()
                changes.name = "Renamed \(index)"
                _ = try await store.updateEmployee(guid: guids[index], changes: changes)
              }
              return (index, true)
            } catch let error as StoreError {
              #expect(error.code == .alreadyExists)
              return (index, false)
            } catch {
              Issue.record("unexpected \(error)")
              return (index, false)
            }
          }
        }
        return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
      }
      #expect(results.filter { !$0.value }.map(\.key) == [3])
      let after = store.writerStatistics
      #expect(after.commits - before.commits < 7, "the neighbours shared a commit")
      #expect(after.failedWrites - before.failedWrites == 1)
      for index in 0 ..< 8 where index != 3 {
        #expect(
          try await store.employee(guid: guids[index], fields: .name).name == "Renamed \(index)"
        )
      }
      #expect(try await store.employee(guid: taken, fields: .name).name != "Dup")
      #expect(store.latestChange - changesBefore == 7, "only the 7 good writes are logged")
    }
  }

  @Test("each write logs its change in the same transaction, with fields and author")
  func changeLog() async throws {
    try await withTemporaryStore { store async throws in
      let context = WriteContext(author: "ada")
      let start = store.latestChange
      let created = try await store.createEmployee(makeEmployee(name: "Log Me"), context: context)
      var changes = EmployeeChanges()
      changes.name = "Log Me"  // unchanged
      changes.vacationDays = 3
      changes.department = "Sales"
      let updated = try await store.updateEmployee(
        guid: created.guid,
        changes: changes,
        context: context
      )
      #expect(updated.vacationDays == 3 && updated.department == "Sales")
      #expect(updated.updateTimeMillis >= created.updateTimeMillis)
      try await store.deleteEmployee(guid: created.guid)
      let log = try await store.changes(after: start, limit: 10)
      #expect(log.map(\.kind) == [.inserted, .updated, .deleted])
      #expect(log.map(\.sequence) == [start + 1, start + 2, start + 3])
      #expect(log[1].fields == ["department", "vacation_days"])
      #expect(log.map(\.author) == ["ada", "ada", ""])
      #expect(Set(log.map(\.guid)) == [created.guid])
      #expect(store.latestChange == start + 3)
    }
  }

  @Test("bulk upsert merges by guid, keeps unset fields, and reports bad rows by index")
  func upsert() async throws {
    let existing = makeEmployee(name: "Old Name", department: "Sales")
    try await withTemporaryStore(extra: [existing]) { store async throws in
      var rename = EmployeeChanges()
      rename.name = "New Name"
      rename.active = false
      var fresh = EmployeeChanges(setting: makeEmployee(name: "Fresh"))
      fresh.vacationDays = 7
      var missingName = EmployeeChanges()
      missingName.department = "Sales"
      missingName.startDate = "2020-01-01"
      var badDate = EmployeeChanges()
      badDate.startDate = "2020-13-01"
      let freshGUID = UUID().uuidString
      let messages: [[UpsertRow]] = [
        [
          UpsertRow(guid: existing.guid.uppercased(), changes: rename),
          UpsertRow(guid: "not-a-guid", changes: fresh),
        ],
        [
          UpsertRow(guid: freshGUID, changes: fresh),
          UpsertRow(guid: UUID().uuidString, changes: missingName),
          UpsertRow(guid: existing.guid, changes: badDate),
        ],
      ]
      let summary = try await store.upsertEmployees(
        AsyncStreamOf(messages),
        context: WriteContext(author: "hr-feed"),
        chunkRows: 2
      )
      #expect(summary.inserted == 1)
      #expect(summary.updated == 1)
      #expect(summary.rejected.map(\.index) == [1, 3, 4])
      #expect(summary.rejected[0].reason.contains("guid"))
      #expect(summary.rejected[1].reason.contains("name"))
      #expect(summary.rejected[2].reason.contains("start_date"))
      let merged = try await store.employee(guid: existing.guid, fields: .all)
      #expect(merged.name == "New Name" && !merged.active)
      #expect(merged.department == "Sales", "a field the row leaves out keeps its value")
      let inserted = try await store.employee(guid: freshGUID.lowercased(), fields: .all)
      #expect(inserted.vacationDays == 7 && inserted.active)
      let log = try await store.changes(after: 0, limit: 100).suffix(2)
      #expect(log.map(\.kind) == [.updated, .inserted])
      #expect(log.first?.fields == ["name", "active"])
      #expect(log.allSatisfy { $0.author == "hr-feed" })
    }
  }

  @Test("batch update changes only rows that differ; an unknown department matches nothing")
  func batchUpdate() async throws {
    try await withTemporaryStore(employees: 200) { store async throws in
      let sales = try await store.countEmployees(filter: EmployeeFilter(department: "Sales"))
      let inactiveSales = try await store.countEmployees(
        filter: EmployeeFilter(department: "Sales", active: false)
      )
      var changes = EmployeeChanges()
      changes.active = false
      let start = store.latestChange
      let affected = try await store.batchUpdateEmployees(
        filter: EmployeeFilter(department: "Sales"),
        changes: changes
      )
      #expect(affected == sales - inactiveSales)
      #expect(store.latestChange - start == Int64(affected))
      #expect(
        try await store.countEmployees(filter: EmployeeFilter(department: "Sales", active: true))
          == 0
      )
      let again = try await store.batchUpdateEmployees(
        filter: EmployeeFilter(department: "Sales"),
        changes: changes
      )
      #expect(again == 0)
      let none = try await store.batchUpdateEmployees(
        filter: EmployeeFilter(department: "No Such Department"),
        changes: changes
      )
      #expect(none == 0)
    }
  }

  @Test("delete many removes in chunks up to the limit and says whether more match")
  func deleteMany() async throws {
    try await withTemporaryStore(employees: 1200) { store async throws in
      let filter = EmployeeFilter(active: true)
      let matching = Int(try await store.countEmployees(filter: filter))
      let commits = store.writerStatistics.commits
      let first = try await store.deleteEmployees(filter: filter, limit: matching - 10)
      #expect(first.deleted == matching - 10)
      #expect(first.more)
      #expect(store.writerStatistics.commits - commits >= 2, "more than one chunk, one commit each")
      let rest = try await store.deleteEmployees(filter: filter, limit: 100)
      #expect(rest.deleted == 10)
      #expect(!rest.more)
      #expect(try await store.countEmployees(filter: filter) == 0)
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == Int64(1200 - matching))
    }
  }

  @Test("pruning moves the retention boundary, and a token behind it is out of range")
  func pruning() async throws {
    try await withTemporaryStore(employees: 50) { store async throws in
      #expect(try await store.changes(after: 0, limit: 100).count == 50)
      let pruned = try await store.pruneChangeLog(
        retention: ChangeLogRetention(maximumAge: .seconds(3600), maximumRows: 20)
      )
      #expect(pruned == 30)
      await #expect(throws: StoreError.self) { _ = try await store.changes(after: 29, limit: 10) }
      #expect(try await store.changes(after: 30, limit: 100).map(\.sequence) == Array(31 ... 50))
      await #expect(throws: StoreError.self) { _ = try await store.changes(after: 51, limit: 10) }
      // Age-based: everything is older than a cutoff in the future.
      let byAge = try await store.pruneChangeLog(
        retention: ChangeLogRetention(maximumAge: .seconds(0), maximumRows: 1000),
        nowMillis: SQLiteStore.nowMillis() + 60_000
      )
      #expect(byAge == 20)
      #expect(try await store.changes(after: 50, limit: 10).isEmpty)
    }
  }

  @Test("synchronous is FULL by default, and a checkpoint empties the WAL off the writer")
  func durabilitySettings() async throws {
    try await withTemporaryStore(employees: 100) { store async throws in
      #expect(try store.pragma("synchronous") == "2")
      // The writer is the connection that commits: FULL must hold there (GRDB's WAL setup
      // had turned it to NORMAL, 1).
      #expect(try store.writerPragma("synchronous") == "2")
      let (walPages, checkpointed) = try await store.checkpoint()
      #expect(walPages > 0)
      #expect(checkpointed == walPages)
    }
  }
}

/// An async sequence over fixed elements, standing in for a client stream.
struct AsyncStreamOf<Element: Sendable>: AsyncSequence {
  let elements: [Element]
  init(_ elements: [Element]) { self.elements = elements }

  struct AsyncIterator: AsyncIteratorProtocol {
    var base: IndexingIterator<[Element]>
    mutating func next() async -> Element? { self.base.next() }
  }

  func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(base: self.elements.makeIterator())
  }
}
