import GRDB
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

@Suite("Reads", .timeLimit(.minutes(10)))
struct ReadTests {
  static let nunez = makeEmployee(name: "José Núñez", department: "Legal", active: false)
  static let zoe = makeEmployee(name: "Zoë Ångström", department: "Design")

  @Test("a read mask fills only the asked fields")
  func readMask() async throws {
    try await withTemporaryStore(employees: 10, extra: [Self.nunez]) { store async throws in
      let partial = try await store.employee(guid: Self.nunez.guid, fields: [.name, .department])
      #expect(partial.name == "José Núñez")
      #expect(partial.department == "Legal")
      #expect(partial.guid == "")
      #expect(partial.email == "")
      #expect(partial.startDate == "")
      let full = try await store.employee(guid: Self.nunez.guid, fields: .all)
      #expect(full.guid == Self.nunez.guid)
      #expect(full.email == Self.nunez.email)
      #expect(full.startDate == Self.nunez.startDate)
      #expect(full.vacationDays == Self.nunez.vacationDays)
      #expect(full.active == false)
      #expect(full.updateTimeMillis > 0)
    }
  }

  @Test("thumbnails come back only when asked for")
  func thumbnails() async throws {
    try await withTemporaryStore(extra: [Self.nunez]) { store async throws in
      try store.write { db in
        try db.execute(
          sql: """
            INSERT INTO employee_thumbnails (employee_id, data, width, height)
            SELECT id, x'FFD8FFE0', 90, 120 FROM employees WHERE guid = ?;
            UPDATE employees SET picture_etag = 'etag-1' WHERE guid = ?;
            """,
          arguments: [Self.nunez.guid, Self.nunez.guid]
        )
      }
      let with = try await store.employee(guid: Self.nunez.guid, fields: .all)
      #expect(with.thumbnail == [0xFF, 0xD8, 0xFF, 0xE0])
      #expect(with.pictureEtag == "etag-1")
      let without = try await store.employeePage(
        fields: .all.subtracting(.thumbnail),
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 10
      )
      #expect(without.employees.first?.thumbnail == nil)
      #expect(without.employees.first?.pictureEtag == "etag-1")
    }
  }

  @Test(
    "name_contains ignores case and diacritics",
    arguments: [
      ("jose", true), ("JOSÉ", true), ("NUÑ", true), ("nun", true), ("é n", true),
      ("josé núñez", true), ("zoe", false), ("xyz", false), ("j", true),
    ]
  )
  func search(text: String, findsNunez: Bool) async throws {
    try await withTemporaryStore(extra: [Self.nunez, Self.zoe]) { store async throws in
      let page = try await store.employeePage(
        fields: [.guid],
        filter: EmployeeFilter(nameContains: text),
        order: .name,
        after: nil,
        limit: 10
      )
      #expect(page.employees.contains { $0.guid == Self.nunez.guid } == findsNunez)
      #expect(
        try await store.countEmployees(filter: EmployeeFilter(nameContains: text))
          == Int64(page.employees.count)
      )
    }
  }

  @Test("search treats GLOB characters literally")
  func literalSearch() async throws {
    let odd = makeEmployee(name: "Star*Bright [QA]")
    try await withTemporaryStore(extra: [odd, Self.nunez]) { store async throws in
      for text in ["*", "r*b", "[qa]", "?"] {
        let count = try await store.countEmployees(filter: EmployeeFilter(nameContains: text))
        #expect(count == (text == "?" ? 0 : 1), "searching \(text)")
      }
    }
  }

  @Test("department and active filters are exact")
  func filters() async throws {
    try await withTemporaryStore(extra: [Self.nunez, Self.zoe]) { store async throws in
      #expect(try await store.countEmployees(filter: EmployeeFilter(department: "Legal")) == 1)
      #expect(try await store.countEmployees(filter: EmployeeFilter(department: "legal")) == 0)
      #expect(try await store.countEmployees(filter: EmployeeFilter(department: "Nope")) == 0)
      #expect(try await store.countEmployees(filter: EmployeeFilter(active: true)) == 1)
      #expect(try await store.countEmployees(filter: EmployeeFilter(active: false)) == 1)
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 2)
    }
  }

  @Test("batch get keeps request order, repeats included, and is all or nothing")
  func batchGet() async throws {
    try await withTemporaryStore(employees: 50, extra: [Self.nunez, Self.zoe]) {
      store async throws in
      let guids = [Self.zoe.guid, Self.nunez.guid, Self.zoe.guid]
      let found = try await store.employees(guids: guids, fields: [.guid])
      #expect(found.map(\.guid) == guids)
      let unknown = "00000000-0000-4000-8000-000000000000"
      await #expect(throws: StoreError(.notFound, "no employee with guid '\(unknown)'")) {
        _ = try await store.employees(guids: [Self.zoe.guid, unknown], fields: [.guid])
      }
    }
  }
}
