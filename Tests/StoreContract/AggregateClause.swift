internal import Foundation
public import RosterDomain
internal import RosterStore

/// Aggregates over date ranges a date picker sends (whole and partial months, one day,
/// ranges wider than the data), with and without a department, against the model of the
/// sales the recount clause wrote: what the daily statistics and the amount buckets answer.
extension StoreContract {
  static func aggregatesMatchModel(
    _ store: Store,
    sales: [(guid: String, cents: Int64, date: String)],
    departmentOf: [String: String]
  ) async throws {
    let ranges: [(String?, String?)] = [
      (nil, nil), ("1999-01-01", "2099-12-31"), ("2022-03-05", "2024-02-17"),
      ("2023-01-01", "2023-12-31"),
      ("2023-06-15", "2023-06-15"), ("2022-11-20", "2023-02-10"), (nil, "2023-04-30"),
      ("2030-01-01", nil),
    ]
    let functions: [AggregateFunction] = [
      .median, .minimum, .maximum, .standardDeviation, .average,
    ]
    let department = departmentOf.values.sorted().first
    for (from, to) in ranges {
      for scope in [nil, department] {
        let filter = SalesFilter(department: scope, fromDate: from, toDate: to)
        let matching = sales.filter {
          (scope == nil || departmentOf[$0.guid] == scope) && $0.date >= (from ?? "")
            && $0.date <= (to ?? "9999")
        }
        for function in functions {
          for grouping in [AggregateGrouping.none, .department, .month] {
            var groups: [AggregateValue] = []
            var after: String?
            repeat {
              let page = try await store.aggregateSales(
                function,
                groupedBy: grouping,
                filter: filter,
                page: AggregatePageRequest(after: after, limit: 5)
              )
              groups += page.groups
              after = page.next
            } while after != nil
            let expected = Dictionary(grouping: matching) { sale -> String in
              switch grouping {
              case .department: departmentOf[sale.guid]!
              case .month: String(sale.date.prefix(7))
              default: ""
              }
            }.mapValues { Self.reference(function, $0.map { Double($0.cents) }) }
              // Grouped by nothing, there is always one group: 0 when no sale matches.
              .merging(grouping == .none && matching.isEmpty ? ["": 0] : [:]) { $1 }
            try Self.require(
              groups.map(\.key) == expected.keys.sorted(),

              "\(function) by \(grouping) over \(filter): keys \(groups.map(\.key)), expected \(expected.keys.sorted())"
            )
            for group in groups {
              let want = expected[group.key]!
              try Self.require(
                abs(group.value - want) <= 1e-6 * max(1, abs(want)),
                "\(function) by \(grouping) over \(filter), \(group.key): \(group.value), expected \(want)"
              )
            }
          }
        }
      }
    }
  }

  /// `function` over `values` computed here: the median exact, the standard deviation of
  /// the population; 0 for no values.
  public static func reference(_ function: AggregateFunction, _ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let mean = values.reduce(0, +) / Double(values.count)
    switch function {
    case .count: return Double(values.count)
    case .sum: return values.reduce(0, +)
    case .average: return mean
    case .minimum: return values.min()!
    case .maximum: return values.max()!
    case .median:
      let sorted = values.sorted()
      let middle = sorted.count / 2
      return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    case .standardDeviation:
      return (values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count))
        .squareRoot()
    }
  }
}
