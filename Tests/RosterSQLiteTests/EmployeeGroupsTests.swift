import GRDB
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// Groups by employee: the two ways a page is read (the employees walked in guid order, or a
/// range's few sales sorted by guid) give the same groups, and the choice between them.
@Suite("Groups by employee")
struct EmployeeGroupsTests {
  @Test("by employee, a range's sales sorted and the walk in guid order give the same groups")
  func employeeGroupsByDate() async throws {
    try await withTemporaryStore(employees: 30) { store async throws in
      _ = try await AnalyticsTests.importRandomSales(store, count: 400, seed: 78)
      let department = try AnalyticsTests.rawSales(store)[0].department
      let filters = [
        SalesFilter(fromDate: "2021-04-09", toDate: "2021-04-09"),
        SalesFilter(fromDate: "2021-03-15", toDate: "2021-04-14"),
        SalesFilter(department: department, fromDate: "2021-03-05", toDate: "2022-06-17"),
        SalesFilter(fromDate: "1900-01-01", toDate: "2999-12-31"),
      ]
      for function in AggregateFunction.allCases {
        for filter in filters {
          for after in [nil, "8"] {
            let plans = try [false, true].map { byDate in
              let query = try AnalyticsSQL.aggregateSales(
                function,
                .employee,
                filter,
                after: after,
                employeesByDate: byDate
              )
              return try store.read { db in
                try Row.fetchAll(db, sql: query.sql, arguments: query.arguments)
                  .map { "\($0[0] as String) \(($0[1] as Double?) ?? 0)" }
              }
            }
            #expect(plans[0] == plans[1], "\(function), \(filter), after \(after ?? "")")
            #expect(!plans[0].isEmpty || filter.fromDate == filter.toDate)
          }
        }
      }
      // One day's few sales drive; every sale of the data is too many for 30 employees.
      let chosen = try store.read { db in
        try [filters[0], filters[3], SalesFilter()].map {
          try SQLiteStore.fewSalesForEmployeeGroups(db, $0, limit: 1000)
        }
      }
      #expect(chosen == [true, false, false])
    }
  }
}
