import GRDB
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

@Suite("Keyset pagination", .timeLimit(.minutes(10)))
struct PaginationTests {
  /// Every order, with and without each filter.
  static let shapes: [(EmployeeOrder, EmployeeFilter)] = EmployeeOrder.allCases.flatMap { order in
    [
      EmployeeFilter(),
      EmployeeFilter(department: "Engineering"),
      EmployeeFilter(active: false),
      EmployeeFilter(department: "Sales", active: true),
      EmployeeFilter(nameContains: "an"),
      EmployeeFilter(department: "Design", active: true, nameContains: "a"),
    ].map { (order, $0) }
  }

  @Test("pages cover every matching employee exactly once, in order", arguments: shapes)
  func coverage(order: EmployeeOrder, filter: EmployeeFilter) async throws {
    try await withTemporaryStore(employees: 700) { store async throws in
      let pages = try await Self.walk(store, order: order, filter: filter, pageSize: 37)
      let expected = try Self.bruteForce(store, order: order, filter: filter)
      #expect(pages.map(\.guid) == expected.map(\.guid))
      #expect(Set(pages.map(\.guid)).count == pages.count)
      #expect(try await store.countEmployees(filter: filter) == Int64(expected.count))
    }
  }

  @Test(
    "rows inserted between pages neither repeat nor hide existing rows",
    arguments: EmployeeOrder.allCases
  )
  func insertsBetweenPages(order: EmployeeOrder) async throws {
    try await withTemporaryStore(employees: 300) { store async throws in
      let before = Set(
        try Self.bruteForce(store, order: order, filter: EmployeeFilter()).map(\.guid)
      )
      var seen: [String] = []
      var cursor: EmployeeCursor?
      var round = 0
      repeat {
        let page = try await store.employeePage(
          fields: [.guid],
          filter: EmployeeFilter(),
          order: order,
          after: cursor,
          limit: 25
        )
        seen += page.employees.map(\.guid)
        cursor = page.next
        round += 1
        // Names and dates that land before, inside and after the pages already read.
        _ = try await store.importEmployees([
          makeEmployee(name: "Aaron \(round)", department: "Accounting", startDate: "1980-01-01"),
          makeEmployee(name: "Mid \(round)", department: "Legal", startDate: "2005-06-15"),
          makeEmployee(name: "Zed \(round)", department: "Support", startDate: "2030-01-01"),
        ])
      } while cursor != nil
      #expect(Set(seen).count == seen.count, "no employee appears twice")
      #expect(before.isSubset(of: Set(seen)), "every employee present at the start is listed")
    }
  }

  @Test("duplicate names are ordered by id and never skipped")
  func duplicateNames() async throws {
    let twins = (0 ..< 25).map { _ in makeEmployee(name: "Same Name") }
    try await withTemporaryStore(employees: 20, extra: twins) { store async throws in
      let pages = try await Self.walk(store, order: .name, filter: EmployeeFilter(), pageSize: 7)
      #expect(pages.count == 45)
      #expect(Set(pages.map(\.guid)).count == 45)
    }
  }

  @Test("a cursor with the wrong number of keys is rejected")
  func wrongCursor() async throws {
    try await withTemporaryStore(employees: 5) { store async throws in
      await #expect(throws: StoreError.self) {
        _ = try await store.employeePage(
          fields: .all,
          filter: EmployeeFilter(),
          order: .department,
          after: EmployeeCursor(keys: ["x"], id: 1),
          limit: 5
        )
      }
    }
  }

  static func walk(
    _ store: SQLiteStore,
    order: EmployeeOrder,
    filter: EmployeeFilter,
    pageSize: Int
  ) async throws -> [Employee] {
    var all: [Employee] = []
    var cursor: EmployeeCursor?
    repeat {
      let page = try await store.employeePage(
        fields: [.guid, .name, .department, .startDate],
        filter: filter,
        order: order,
        after: cursor,
        limit: pageSize
      )
      #expect(page.employees.count <= pageSize)
      all += page.employees
      cursor = page.next
    } while cursor != nil
    return all
  }

  /// The expected listing, computed in Swift from every row.
  static func bruteForce(
    _ store: SQLiteStore,
    order: EmployeeOrder,
    filter: EmployeeFilter
  ) throws -> [Employee] {
    let rows = try store.read { db in
      try Row.fetchAll(
        db,
        sql: "SELECT id, guid, name, department, active, start_date FROM employees"
      )
    }
    var employees = rows.map { row -> Employee in
      var e = Employee()
      e.id = row["id"]
      e.guid = row["guid"]
      e.name = row["name"]
      e.department = row["department"]
      e.active = row["active"]
      e.startDate = row["start_date"]
      return e
    }
    employees = employees.filter { e in
      (filter.department == nil || e.department == filter.department)
        && (filter.active == nil || e.active == filter.active)
        && (filter.nameContains.map { TextFolding.fold(e.name).contains(TextFolding.fold($0)) }
          ?? true)
    }
    func key(_ e: Employee) -> [String] {
      switch order {
      case .name: [TextFolding.fold(e.name)]
      case .startDate: [e.startDate]
      case .department: [e.department, TextFolding.fold(e.name)]
      }
    }
    return employees.sorted { a, b in
      // SQLite compares text as UTF-8 bytes; do the same.
      let ka = Array(key(a).joined(separator: "\u{0}").utf8)
      let kb = Array(key(b).joined(separator: "\u{0}").utf8)
      return ka == kb ? a.id < b.id : ka.lexicographicallyPrecedes(kb)
    }
  }
}
