import Foundation
import GRDB
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
    arguments: [AggregateGrouping.year, .month, .day]
  )
  func budgetedPages(grouping: AggregateGrouping) async throws {
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
      let expected = Dictionary(grouping: raw, by: key).mapValues {
        AnalyticsTests.reference(.median, $0.map(\.amount))
      }
      var got: [AggregateValue] = []
      var pages = 0
      var after: String?
      repeat {
        let page = try await store.aggregateSales(
          .median,
          groupedBy: grouping,
          filter: SalesFilter(),
          page: AggregatePageRequest(after: after, limit: 1000)
        )
        // A page holds one group past the budget at most: the groups before it fit.
        let sizes = page.groups.map { group in raw.filter { key($0) == group.key }.count }
        #expect(sizes.dropLast().reduce(0, +) <= 25, "\(sizes)")
        got += page.groups
        after = page.next
        pages += 1
      } while after != nil
      #expect(pages > 1, "the budget cut the groups into pages")
      #expect(got.map(\.key) == expected.keys.sorted())
      for group in got {
        #expect(AnalyticsTests.close(group.value, expected[group.key] ?? .nan), "\(group.key)")
      }
    }
  }
}
