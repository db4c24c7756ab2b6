import GRDB
import RosterSeed
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// Search against brute force: generated names with accents, Ł, ß, apostrophes and spaces,
/// and queries of 1 to 6 characters, through every order, filter and plan the store can pick.
@Suite("Search matches brute force", .timeLimit(.minutes(10)))
struct SearchPropertyTests {
  /// Letters that fold in every way the folding knows: case, marks, Ł, ß, Ø, Æ, and text
  /// that folds to what another letter already is.
  static let alphabet: [Character] = [
    "a", "á", "A", "Á", "e", "é", "È", "o", "ö", "Ø", "u", "ü", "n", "ñ", "Ñ", "l", "ł", "Ł",
    "s", "ß", "z", "ž", "c", "ç", "æ", "'", " ", "-", "k", "r",
  ]

  /// Deterministic names of 1 to 14 characters; a few repeat, as names in a directory do.
  static func names(count: Int, seed: UInt64) -> [String] {
    var random = SplitMix64(seed: seed)
    var names: [String] = []
    for index in 0 ..< count {
      if index > 10, random.next() % 4 == 0 {
        names.append(names[Int(random.next() % UInt64(names.count))])
        continue
      }
      let length = 1 + Int(random.next() % 14)
      names.append(
        String(
          (0 ..< length).map { _ in Self.alphabet[Int(random.next() % UInt64(Self.alphabet.count))]
          }
        )
      )
    }
    return names
  }

  /// Queries of 1 to 6 characters: pieces of stored names (so most find something), with
  /// their case and marks changed, and random strings (so some find nothing).
  static func queries(from names: [String], count: Int, seed: UInt64) -> [String] {
    var random = SplitMix64(seed: seed)
    return (0 ..< count).map { index in
      let length = 1 + index % 6
      if index % 3 == 2 {
        return String(
          (0 ..< length).map { _ in Self.alphabet[Int(random.next() % UInt64(Self.alphabet.count))]
          }
        )
      }
      let name = Array(names[Int(random.next() % UInt64(names.count))])
      let start = Int(random.next() % UInt64(max(1, name.count - length + 1)))
      let piece = String(name[start ..< min(name.count, start + length)])
      return index % 2 == 0 ? piece.uppercased() : piece
    }
  }

  static let filters: [(String?, Bool?)] = [
    (nil, nil), ("Legal", nil), (nil, false), ("Design", true),
  ]

  @Test("every page of every search, in every order and plan, equals brute force")
  func pagesMatchBruteForce() async throws {
    let names = Self.names(count: 400, seed: 17)
    let departments = ["Design", "Legal", "Sales"]
    let employees = names.enumerated().map { index, name in
      makeEmployee(
        name: name,
        department: departments[index % 3],
        active: index % 5 != 0,
        startDate: "20\(10 + index % 15)-0\(1 + index % 9)-1\(index % 10)"
      )
    }
    try await withTemporaryStore(extra: employees) { store async throws in
      for text in Self.queries(from: names, count: 60, seed: 5) {
        for (department, active) in Self.filters {
          let filter = EmployeeFilter(department: department, active: active, nameContains: text)
          try await Self.check(store, filter: filter, context: "'\(text)' \(filter)")
        }
      }
    }
  }

  @Test("search and counts stay exact after renames, (in)activations, deletes and re-adds")
  func searchAfterWrites() async throws {
    let names = Self.names(count: 200, seed: 99)
    let employees = names.map { makeEmployee(name: $0) }
    try await withTemporaryStore(extra: employees) { store async throws in
      var random = SplitMix64(seed: 3)
      for (index, employee) in employees.enumerated() where index % 3 == 0 {
        var changes = EmployeeChanges()
        changes.name = names[Int(random.next() % UInt64(names.count))] + "ß"
        // Some renamed employees also change their active flag in the same update.
        if index % 2 == 0 { changes.active = false }
        _ = try await store.updateEmployee(guid: employee.guid, changes: changes)
      }
      for (index, employee) in employees.enumerated() where index % 7 == 2 {
        var changes = EmployeeChanges()
        changes.active = false
        _ = try await store.updateEmployee(guid: employee.guid, changes: changes)
        if index % 2 == 0 {
          changes.active = true
          _ = try await store.updateEmployee(guid: employee.guid, changes: changes)
        }
      }
      for (index, employee) in employees.enumerated() where index % 4 == 1 {
        try await store.deleteEmployee(guid: employee.guid)
      }
      _ = try await store.deleteEmployees(filter: EmployeeFilter(nameContains: "ł"), limit: 1000)
      _ = try await store.importEmployees(
        Self.names(count: 50, seed: 7).map { makeEmployee(name: $0) }
      )
      // A name no one carries any more is gone from the names, and no name is counted twice.
      let stale = try store.read { db in
        try Int.fetchOne(
          db,
          sql: """
            SELECT count(*) FROM employee_names n
            WHERE employees != (SELECT count(*) FROM employees e WHERE e.name_folded = n.name_folded)
              OR active != (SELECT count(*) FROM employees e
                            WHERE e.name_folded = n.name_folded AND e.active)
            """
        )
      }
      #expect(stale == 0)
      let missing = try store.read { db in
        try Int.fetchOne(
          db,
          sql: """
            SELECT count(*) FROM (SELECT DISTINCT name_folded FROM employees)
            WHERE name_folded NOT IN (SELECT name_folded FROM employee_names)
            """
        )
      }
      #expect(missing == 0)
      for text in Self.queries(from: names, count: 40, seed: 11) + ["ß", "ss", "ł", "l"] {
        for active in [nil, true, false] {
          try await Self.check(
            store,
            filter: EmployeeFilter(active: active, nameContains: text),
            context: "'\(text)' active \(String(describing: active))"
          )
        }
      }
    }
  }

  /// Checks one filter: the count, and the pages of every order through the store, and for
  /// the orders other than by name, both plans (matches sorted, or the order's index tested).
  static func check(_ store: SQLiteStore, filter: EmployeeFilter, context: String) async throws {
    for order in EmployeeOrder.allCases {
      let expected = try PaginationTests.bruteForce(store, order: order, filter: filter).map(\.guid)
      let pages = try await PaginationTests.walk(store, order: order, filter: filter, pageSize: 7)
      #expect(pages.map(\.guid) == expected, "\(context), by \(order)")
      if order != .name {
        for few in [false, true] {
          let rows = try Self.walkSQL(store, order: order, filter: filter, few: few)
          #expect(rows == expected, "\(context), by \(order), few \(few)")
        }
      }
      if order == .name {
        #expect(
          try await store.countEmployees(filter: filter) == Int64(expected.count),
          "\(context)"
        )
      }
    }
  }

  /// Every page of one plan, read through `EmployeeSQL.page` directly.
  static func walkSQL(
    _ store: SQLiteStore,
    order: EmployeeOrder,
    filter: EmployeeFilter,
    few: Bool
  ) throws -> [String] {
    var guids: [String] = []
    var cursor: EmployeeCursor?
    repeat {
      let query = EmployeeSQL.page(
        fields: [.guid],
        filter: filter,
        order: order,
        after: cursor,
        limit: 6,
        few: few
      )
      let page = try store.read { db -> [(guid: String, after: EmployeeCursor)] in
        let statement = try db.makeStatement(sql: query.sql)
        let rows = try Row.fetchCursor(statement, arguments: query.arguments)
        var page: [(guid: String, after: EmployeeCursor)] = []
        while let row = try rows.next() {
          let (employee, keyIndex) = EmployeeSQL.decode(statement.sqliteStatement, [.guid])
          page.append(
            (
              employee.guid,
              EmployeeCursor(
                keys: (keyIndex ..< row.count).map { row[$0] as String },
                id: employee.id
              )
            )
          )
        }
        return page
      }
      cursor = nil
      for row in page.prefix(5) {
        guids.append(row.guid)
        cursor = row.after
      }
      if page.count <= 5 { cursor = nil }
    } while cursor != nil
    return guids
  }
}
