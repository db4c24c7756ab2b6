import Foundation
import GRDB
import RosterSeed
import StoreContract
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// Counters and rollups kept in step with every write, the aggregates against references the
/// test computes itself, and the calendar cache.
@Suite("Analytics", .timeLimit(.minutes(10)))
struct AnalyticsTests {
  static let departments = ["Design", "Engineering", "Sales", "Support"]

  static func date(_ random: inout SplitMix64) -> String {
    let year = 2020 + Int(random.next() % 3)
    let month = 1 + Int(random.next() % 12)
    let day = 1 + Int(random.next() % 28)
    return String(format: "%04d-%02d-%02d", year, month, day)
  }

  @Test("every write path keeps every counter and rollup equal to a full recount")
  func countersStayInStep() async throws {
    try await withTemporaryStore(employees: 40) { store async throws in
      var random = SplitMix64(seed: 0xA11)
      func guids() async throws -> [String] {
        try await store.employeePage(
          fields: .all,
          filter: EmployeeFilter(),
          order: .name,
          after: nil,
          limit: 1000
        )
        .employees.map(\.guid)
      }
      for step in 0 ..< 160 {
        let everyone = try await guids()
        let someone = everyone.isEmpty ? nil : everyone[Int(random.next() % UInt64(everyone.count))]
        let department = Self.departments[Int(random.next() % 4)]
        let operation = random.next() % 9
        switch operation {
        case 0:
          _ = try await store.createEmployee(
            makeEmployee(
              name: "Step \(step)",
              department: department,
              active: random.next() % 2 == 0
            )
          )
        case 1 where someone != nil:
          var changes = EmployeeChanges()
          changes.department = department
          changes.active = random.next() % 2 == 0
          changes.vacationDays = Int(random.next() % 30)
          _ = try await store.updateEmployee(guid: someone!, changes: changes)
        case 2 where someone != nil:
          try await store.deleteEmployee(guid: someone!)
        case 3:
          var changes = EmployeeChanges()
          changes.department = Self.departments[Int(random.next() % 4)]
          changes.vacationDays = Int(random.next() % 30)
          _ = try await store.batchUpdateEmployees(
            filter: EmployeeFilter(department: department),
            changes: changes
          )
        case 4:
          var rows: [UpsertRow] = []
          for guid in everyone.prefix(3) {
            var changes = EmployeeChanges()
            changes.department = department
            changes.active = random.next() % 2 == 0
            rows.append(UpsertRow(guid: guid, changes: changes))
          }
          rows.append(
            UpsertRow(
              guid: UUID().uuidString.lowercased(),
              changes: EmployeeChanges(
                setting: makeEmployee(name: "Upserted \(step)", department: department)
              )
            )
          )
          _ = try await store.upsertEmployees(AsyncStreamOf([rows]))
        case 5:
          _ = try await store.deleteEmployees(
            filter: EmployeeFilter(department: department),
            limit: 2
          )
        case 6, 7:
          var sales: [SaleRow] = []
          for _ in 0 ..< Int(1 + random.next() % 20) {
            let guid =
              everyone.isEmpty || random.next() % 10 == 0
              ? "00000000-0000-4000-8000-000000000000"
              : everyone[Int(random.next() % UInt64(everyone.count))]
            sales.append(
              SaleRow(
                employeeGUID: guid,
                amountCents: Int64(random.next() % 100_000),
                date: Self.date(&random)
              )
            )
          }
          _ = try await store.importSales(AsyncStreamOf([sales]))
        default:
          _ = try await store.deleteSales(
            before: Self.date(&random),
            limit: Int(1 + random.next() % 10)
          )
        }
        let drift = try Self.drift(store)
        #expect(drift == nil, "after step \(step) (operation \(operation)): \(drift ?? "")")
        if drift != nil { return }
      }
      let sales = try store.read { db in
        try Int.fetchOne(db, sql: "SELECT count(*) FROM sales") ?? 0
      }
      #expect(sales > 100, "the mix really wrote sales (\(sales) left)")
    }
  }

  /// Raw sales as the test sees them: department, guid, date and amount in cents.
  /// `count` sales of random amounts and dates among the store's first 100 employees by name;
  /// returns their guids.
  @discardableResult
  static func importRandomSales(
    _ store: SQLiteStore,
    count: Int,
    seed: UInt64
  ) async throws -> [String] {
    var random = SplitMix64(seed: seed)
    let guids = try await store.employeePage(
      fields: .guid,
      filter: EmployeeFilter(),
      order: .name,
      after: nil,
      limit: 100
    )
    .employees.map(\.guid)
    let sales = (0 ..< count).map { _ in
      SaleRow(
        employeeGUID: guids[Int(random.next() % UInt64(guids.count))],
        amountCents: Int64(random.next() % 50_000),
        date: Self.date(&random)
      )
    }
    _ = try await store.importSales(AsyncStreamOf([sales]))
    return guids
  }

  static func rawSales(
    _ store: SQLiteStore
  ) throws -> [(department: String, guid: String, date: String, amount: Double)] {
    try store.read { db in
      try Row.fetchAll(
        db,
        sql:
          "SELECT e.department, e.guid, s.date, s.amount_cents FROM sales s JOIN employees e ON e.id = s.employee_id"
      ).map { ($0[0], $0[1], $0[2], Double($0[3] as Int64)) }
    }
  }

  /// Every group of an aggregate, walked in pages of 7; no page is larger, and no key comes
  /// twice or out of order.
  static func everyPage(
    _ read: (AggregatePageRequest) async throws -> AggregatePage
  ) async throws -> [AggregateValue] {
    var groups: [AggregateValue] = []
    var after: String?
    repeat {
      let page = try await read(AggregatePageRequest(after: after, limit: 7))
      #expect(page.groups.count <= 7)
      if let last = groups.last, let first = page.groups.first { #expect(first.key > last.key) }
      groups += page.groups
      after = page.next
    } while after != nil
    return groups
  }

  static func reference(_ function: AggregateFunction, _ values: [Double]) -> Double {
    StoreContract.reference(function, values)
  }

  static func close(_ a: Double, _ b: Double) -> Bool {
    abs(a - b) <= 1e-6 * max(1, abs(a), abs(b))
  }

  @Test(
    "each function and grouping of AggregateSales matches a reference",
    arguments: AggregateFunction.allCases
  )
  func aggregateSales(function: AggregateFunction) async throws {
    try await withTemporaryStore(employees: 30) { store async throws in
      let guids = try await Self.importRandomSales(store, count: 400, seed: 77)
      let raw = try Self.rawSales(store)
      let department = raw[0].department
      // A range of whole months, one that splits months, a department in a range, and all.
      let filters = [
        SalesFilter(fromDate: "2021-03-01", toDate: "2022-06-30"),
        SalesFilter(fromDate: "2021-03-05", toDate: "2022-06-17"),
        SalesFilter(department: department, fromDate: "2021-03-05", toDate: "2022-06-30"),
        SalesFilter(),
      ]
      let groupings: [(AggregateGrouping, (String, String, String) -> String)] = [
        (.none, { _, _, _ in "" }), (.department, { d, _, _ in d }), (.employee, { _, g, _ in g }),
        (.year, { _, _, date in String(date.prefix(4)) }),
        (.month, { _, _, date in String(date.prefix(7)) }),
        (.day, { _, _, date in date }),
      ]
      for filter in filters {
        let filtered = raw.filter {
          (filter.department == nil || $0.department == filter.department)
            && $0.date >= (filter.fromDate ?? "") && $0.date <= (filter.toDate ?? "9999")
        }
        for (grouping, key) in groupings {
          // Walked in pages of 7 groups, so paging is checked against the same reference.
          let got = try await Self.everyPage { page in
            try await store.aggregateSales(
              function,
              groupedBy: grouping,
              filter: filter,
              page: page
            )
          }
          let expected = Dictionary(grouping: filtered) { key($0.department, $0.guid, $0.date) }
            .mapValues { Self.reference(function, $0.map(\.amount)) }
          #expect(got.map(\.key) == expected.keys.sorted(), "\(grouping) keys, \(filter)")
          for group in got {
            #expect(
              Self.close(group.value, expected[group.key] ?? .nan),
              "\(function) by \(grouping), \(filter), \(group.key): \(group.value) vs \(expected[group.key] ?? .nan)"
            )
          }
        }
      }
      let one = guids[0]
      let mine = raw.filter { $0.guid == one }.map(\.amount)
      let got = try await store.aggregateSales(
        function,
        groupedBy: .none,
        filter: SalesFilter(employeeGUID: one)
      )
      #expect(got.next == nil)
      #expect(Self.close(got.groups.first?.value ?? .nan, Self.reference(function, mine)))
    }
  }

  @Test(
    "each function and grouping of AggregateEmployees matches a reference",
    arguments: AggregateFunction.allCases
  )
  func aggregateEmployees(function: AggregateFunction) async throws {
    try await withTemporaryStore(employees: 120) { store async throws in
      let everyone = try await store.employeePage(
        fields: .all,
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 1000
      )
      .employees
      for filter in [
        EmployeeFilter(), EmployeeFilter(department: "Sales"), EmployeeFilter(active: true),
      ] {
        let chosen = everyone.filter {
          (filter.department == nil || $0.department == filter.department)
            && (filter.active == nil || $0.active == filter.active)
        }
        let groupings: [(AggregateGrouping, (Employee) -> String)] = [
          (.none, { _ in "" }), (.department, { $0.department }),
          (.active, { $0.active ? "true" : "false" }),
        ]
        for (grouping, key) in groupings {
          let got = try await Self.everyPage { page in
            try await store.aggregateEmployees(
              function,
              groupedBy: grouping,
              filter: filter,
              page: page
            )
          }
          let expected = Dictionary(grouping: chosen, by: key)
            .mapValues { Self.reference(function, $0.map { Double($0.vacationDays) }) }
          #expect(got.map(\.key) == expected.keys.sorted(), "\(grouping) keys with \(filter)")
          for group in got {
            #expect(
              Self.close(group.value, expected[group.key] ?? .nan),
              "\(function) by \(grouping) with \(filter), \(group.key)"
            )
          }
        }
      }
      await #expect(throws: StoreError.self) {
        try await store.aggregateEmployees(function, groupedBy: .month, filter: EmployeeFilter())
      }
    }
  }

  @Test("a write in March invalidates March's cached days, not April's")
  func calendarCache() async throws {
    try await withTemporaryStore(employees: 5) { store async throws in
      let guid = try await store.employeePage(
        fields: .all,
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 1
      )
      .employees[0].guid
      let sales = [
        SaleRow(employeeGUID: guid, amountCents: 1_000, date: "2024-03-05"),
        SaleRow(employeeGUID: guid, amountCents: 2_000, date: "2024-03-05"),
        SaleRow(employeeGUID: guid, amountCents: 750, date: "2024-04-11"),
      ]
      _ = try await store.importSales(AsyncStreamOf([sales]))
      let march = try await store.salesCalendar(scope: .everyone, year: 2024, month: 3)
      _ = try await store.salesCalendar(scope: .everyone, year: 2024, month: 4)
      #expect(march.days.map(\.number) == [5])
      #expect(march.days.first?.count == 2)
      #expect(march.days.first?.amountCents == 3_000)
      #expect(march.years.map(\.year.number) == [2024])
      #expect(march.years.first?.months.map(\.number) == [3, 4])
      #expect(march.years.first?.year.amountCents == 3_750)
      let before = store.calendarCacheStatistics
      #expect(before.misses == 2 && before.hits == 0)

      _ = try await store.importSales(
        AsyncStreamOf([[SaleRow(employeeGUID: guid, amountCents: 100, date: "2024-03-20")]])
      )
      let again = try await store.salesCalendar(scope: .everyone, year: 2024, month: 3)
      _ = try await store.salesCalendar(scope: .everyone, year: 2024, month: 4)
      let after = store.calendarCacheStatistics
      #expect(after.misses == 3, "March was computed again")
      #expect(after.hits == 1, "April came from the cache")
      #expect(again.days.map(\.number) == [5, 20])
      let byEmployee = try await store.salesCalendar(
        scope: .employee(guid: guid),
        year: 2024,
        month: 4
      )
      #expect(byEmployee.days.map(\.amountCents) == [750])
    }
  }

  @Test("bad sales are rejected per row and the good ones land")
  func importRejections() async throws {
    try await withTemporaryStore(employees: 3) { store async throws in
      let guid = try await store.employeePage(
        fields: .all,
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 1
      )
      .employees[0].guid
      let result = try await store.importSales(
        AsyncStreamOf([
          [
            SaleRow(employeeGUID: guid, amountCents: 1_234, date: "2023-01-02"),
            SaleRow(
              employeeGUID: "00000000-0000-4000-8000-000000000000",
              amountCents: 100,
              date: "2023-01-02"
            ),
            SaleRow(employeeGUID: guid, amountCents: -1, date: "2023-01-02"),
          ],
          [
            SaleRow(employeeGUID: guid, amountCents: 100, date: "1899-12-31"),
            SaleRow(employeeGUID: guid, amountCents: 100, date: "2999-01-01"),
            SaleRow(employeeGUID: guid, amountCents: 100, date: "2023-02-30"),
            SaleRow(
              employeeGUID: guid,
              amountCents: StoreLimits.largestSaleCents + 1,
              date: "2023-01-03"
            ),
            SaleRow(
              employeeGUID: guid,
              amountCents: StoreLimits.largestSaleCents,
              date: "2023-01-03"
            ),
            SaleRow(employeeGUID: guid, amountCents: 500, date: "2023-01-03"),
          ],
        ])
      )
      #expect(result.inserted == 3)
      #expect(result.rejected.map(\.index) == [1, 2, 3, 4, 5, 6])
      #expect(result.rejected[0].reason.contains("no employee"))
      #expect(result.rejected[1].reason.contains("amount"))
      #expect(result.rejected[2].reason.contains("1899-12-31"))
      #expect(result.rejected[4].reason.contains("date"))
      #expect(result.rejected[5].reason.contains("amount_cents 100000000001"))
      let sales = try await store.employeeSales(guid: guid)
      #expect(sales.count == 3)
      #expect(sales.totalCents == 1_734 + StoreLimits.largestSaleCents)
      #expect(try Self.drift(store) == nil)
    }
  }
}
