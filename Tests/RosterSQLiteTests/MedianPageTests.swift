import Foundation
import GRDB
import GRDBSQLite
import RosterSeed
import StoreContract
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// Pages of medians under a sales budget, against `AnalyticsTests`' reference.
@Suite("Median pages", .timeLimit(.minutes(10)))
struct MedianPageTests {
  @Test(
    "pages of medians end at the sales budget, cover every group once, and stay exact",
    arguments: [AggregateGrouping.year, .month, .day],
    [false, true]
  )
  func budgetedPages(grouping: AggregateGrouping, inDepartment: Bool) async throws {
    try await withTemporaryStore(employees: 30, configure: { $0.medianRowsPerPage = 25 }) {
      store async throws in
      try await AnalyticsTests.importRandomSales(store, count: 600, seed: 5)
      let raw = try AnalyticsTests.rawSales(store)
      let key: ((department: String, guid: String, date: String, amount: Double)) -> String = {
        switch grouping {
        case .department: $0.department
        case .year: String($0.date.prefix(4))
        case .month: String($0.date.prefix(7))
        default: $0.date
        }
      }
      // In a department, the budget counts every sale of the page's dates (what it reads), and
      // many pages hold none of the department's: they are empty, with a next page.
      let department = inDepartment ? raw.map(\.department).min() : nil
      let expected = Dictionary(
        grouping: raw.filter { department == nil || $0.department == department },
        by: key
      ).mapValues {
        AnalyticsTests.reference(.median, $0.map(\.amount))
      }
      try await expectBudgetedMedianPages(
        budget: 25,
        expected: expected,
        size: { group in raw.count { key($0) == group } }
      ) { after in
        try await store.aggregateSales(
          .median,
          groupedBy: grouping,
          filter: SalesFilter(department: department),
          page: AggregatePageRequest(after: after, limit: 1000)
        )
      }
    }
  }

  @Test(
    "a page keyed by date reads its own dates only, whatever the range around them",
    arguments: [false, true]
  )
  func pagesReadTheirDates(ofAnEmployee: Bool) async throws {
    try await withTemporaryStore(employees: 30) { store async throws in
      // Sales in 2020, 2021 and 2022: a page of 2021 alone reads a third of them.
      try await AnalyticsTests.importRandomSales(store, count: 900, seed: 11)
      let guid = try store.read { db in
        try String.fetchOne(
          db,
          sql: """
            SELECT e.guid FROM sales s JOIN employees e ON e.id = s.employee_id
            GROUP BY 1 ORDER BY count(*) DESC LIMIT 1
            """
        )
      }
      // A page of medians by year after 2020 through 2021 (`mediansInDateOrder`), or a page
      // of an employee's minimums by year after 2020 (the raw query).
      func query(
        _ from: String,
        _ to: String
      ) throws -> (sql: String, arguments: StatementArguments) {
        ofAnEmployee
          ? try AnalyticsSQL.aggregateSales(
            .minimum,
            .year,
            SalesFilter(employeeGUID: guid, fromDate: from, toDate: to),
            after: "2020"
          )
          : AnalyticsSQL.amountsInDateOrder(
            SalesFilter(fromDate: from, toDate: to),
            after: "2020",
            through: "2021"
          )
      }
      for (from, to) in [("1900-01-01", "2999-12-31"), ("2020-01-01", "2022-12-31")] {
        let (exact, exactRows) = try Self.steps(
          store,
          query("2021-01-01", ofAnEmployee ? to : "2021-12-31")
        )
        // Two bounds on one side of the date let SQLite's index search take the wider one and
        // test the other on each row, and a bound on the group's key serves no index: every
        // sale of 2020 (or 2022) read for nothing.
        let (steps, rows) = try Self.steps(store, query(from, to))
        #expect(exactRows > 0 && rows == exactRows, "\(from)...\(to)")
        #expect(
          steps <= exact + 20,
          "\(from)...\(to): \(steps) steps, \(exact) for its dates alone"
        )
      }
    }
  }

  /// The virtual machine steps SQLite takes to read every row of `query`, and the rows: the
  /// index entries it visits, whether or not they match.
  static func steps(
    _ store: SQLiteStore,
    _ query: (sql: String, arguments: StatementArguments)
  ) throws -> (steps: Int32, rows: Int) {
    try store.read { db in
      let statement = try db.makeStatement(sql: query.sql)
      try statement.setArguments(query.arguments)
      let rows = try Row.fetchAll(statement).count
      return (sqlite3_stmt_status(statement.sqliteStatement, SQLITE_STMTSTATUS_VM_STEP, 0), rows)
    }
  }
}
