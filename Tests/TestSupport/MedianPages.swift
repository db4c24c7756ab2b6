public import RosterDomain
import Testing

/// Walks every page of medians `fetch` gives (from the first, following `next`) and checks
/// them against `expected` medians by key: a page holds one group past `budget` sales at most
/// (`size` gives a group's sales, every department's), the budget cuts the groups into more
/// than one page, every group comes once in key order, and each median is exact. Both
/// backends' tests of budgeted median pages run it.
public func expectBudgetedMedianPages(
  budget: Int,
  expected: [String: Double],
  size: (String) -> Int,
  fetch: (_ after: String?) async throws -> AggregatePage
) async throws {
  var got: [AggregateValue] = []
  var pages = 0
  var after: String?
  repeat {
    let page = try await fetch(after)
    // A page holds one group past the budget at most: the groups before it fit.
    let sizes = page.groups.map { size($0.key) }
    #expect(sizes.dropLast().reduce(0, +) <= budget, "\(sizes)")
    got += page.groups
    after = page.next
    pages += 1
  } while after != nil
  #expect(pages > 1, "the budget cut the groups into pages")
  #expect(got.map(\.key) == expected.keys.sorted())
  for group in got {
    #expect(abs(group.value - (expected[group.key] ?? .nan)) < 1e-6, "\(group.key)")
  }
}
