import Foundation
import RosterDomain
import TestSupport
import Testing

@testable import RosterPostgres

/// Pages of medians by date on PostgreSQL under a small sales budget, against medians
/// computed here from the sales written.
@Suite("PostgreSQL median pages", .timeLimit(.minutes(10)), .enabled(if: PostgresTesting.enabled))
struct PostgresMedianPageTests {
  @Test(
    "pages of medians by date end at the sales budget, cover every group once, and stay exact",
    arguments: [AggregateGrouping.year, .month, .day],
    [false, true]
  )
  func budgetedPages(grouping: AggregateGrouping, inDepartment: Bool) async throws {
    var configuration = try PostgresTesting.configuration()
    configuration.medianRowsPerPage = 25
    try await PostgresTesting.withStore(configuration) { store in
      let context = WriteContext(author: "test")
      var departmentOf: [String: String] = [:]
      for index in 0 ..< 12 {
        // One employee in Legal: a twelfth of the sales, so some pages hold none of them.
        let department = index == 0 ? "Legal" : ["Sales", "Design", "Engineering"][index % 3]
        let made = try await store.createEmployee(
          makeEmployee(name: "Person \(index)", department: department),
          context: context
        )
        departmentOf[made.guid] = department
      }
      var random = SplitMix64(seed: 7)
      let guids = departmentOf.keys.sorted()
      let sales = (0 ..< 300).map { _ in
        SaleRow(
          employeeGUID: guids[Int(random.next() % UInt64(guids.count))],
          amountCents: Int64(random.next() % 50_000),
          date: String(
            format: "20%02d-%02d-%02d",
            20 + random.next() % 3,
            1 + random.next() % 12,
            1 + random.next() % 28
          )
        )
      }
      let batches = AsyncStream<[SaleRow]> {
        $0.yield(sales)
        $0.finish()
      }
      _ = try await store.importSales(batches, context: context, chunkRows: nil)
      let width = grouping == .year ? 4 : grouping == .month ? 7 : 10
      // In a department, the budget counts every sale of the page's dates (what it reads),
      // and some pages hold none of the department's: they are empty, with a next page.
      let department = inDepartment ? "Legal" : nil
      let kept = sales.filter { department == nil || departmentOf[$0.employeeGUID] == department }
      let expected = Dictionary(grouping: kept) { String($0.date.prefix(width)) }.mapValues {
        let amounts = $0.map(\.amountCents).sorted()
        let middle = amounts.count / 2
        return amounts.count % 2 == 1
          ? Double(amounts[middle]) : Double(amounts[middle - 1] + amounts[middle]) / 2
      }
      try await expectBudgetedMedianPages(
        budget: 25,
        expected: expected,
        size: { key in sales.count { $0.date.hasPrefix(key) } }
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
}
