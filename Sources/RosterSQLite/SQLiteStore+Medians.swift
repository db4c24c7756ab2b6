internal import GRDB
internal import RosterDomain

extension SQLiteStore {
  // MARK: Medians
  //
  // A median needs every value of its group. Of everything (in any range) or of a department,
  // it comes from the amount buckets (SQLiteStore+AmountBuckets.swift); by year, month or day, from the amounts in date
  // order (in a department, through its employees), in pages bounded by `medianRowsPerPage`;
  // by employee, from each employee's sales.

  /// Medians of the whole range or of each department, from the amount buckets: a few
  /// thousand bucket counts and one bucket's amounts per group, whatever the range.
  func medianFromBuckets(
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage {
    guard grouping == .department else {
      if page.after != nil { return AggregatePage(groups: [], next: nil) }
      let median = try await self.read(.heavy) { db in try Self.medianFromBuckets(db, filter) }
      return AggregatePage(
        cutting: median.map { [AggregateValue(key: "", value: $0)] } ?? [],
        grouping: .none,
        page: page
      )
    }
    let sizes = AnalyticsSQL.groupSizes(.department, filter, after: page.after)
    let limit = min(page.limit, AmountBuckets.mediansPerPage)
    return try await self.read(.heavy) { db in
      let departments = try String.fetchAll(
        db,
        sql: sizes.sql + " LIMIT \(limit + 1)",
        arguments: sizes.arguments
      )
      var clock = MedianPageClock(limit: limit, budget: self.configuration.medianPageBudget)
      var groups: [AggregateValue] = []
      for department in departments {
        guard clock.takeAnother() else { break }
        var scoped = filter
        scoped.department = department
        if let median = try Self.medianFromBuckets(db, scoped) {
          groups.append(AggregateValue(key: department, value: median))
        }
      }
      return clock.page(groups, of: departments)
    }
  }

  /// Medians by year, month or day without a department, from the sales in date order
  /// (`sales_by_date` alone): each group's amounts are gathered as its rows go by and its
  /// median taken when the next group starts. The rows stream, so an interrupt (a cancel, a
  /// deadline) stops the read at once, where SQL's GROUP BY of a key the index does not hold
  /// sorts every row first.
  func mediansInDateOrder(
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    after: String?,
    through last: String?,
    limit: Int
  ) async throws -> [AggregateValue] {
    let width = grouping == .year ? 4 : grouping == .month ? 7 : 10
    let query = AnalyticsSQL.amountsInDateOrder(filter, after: after, through: last)
    return try await self.read(.heavy, statement: true) { db in
      let rows = try Row.fetchCursor(db, sql: query.sql, arguments: query.arguments)
      var groups: [AggregateValue] = []
      var key: String?
      var amounts: [Int64] = []
      func close() {
        guard let key, !amounts.isEmpty else { return }
        amounts.sort()
        let middle = amounts.count / 2
        let median =
          amounts.count % 2 == 1
          ? Double(amounts[middle]) : Double(amounts[middle - 1] + amounts[middle]) / 2
        groups.append(AggregateValue(key: key, value: median))
        amounts.removeAll(keepingCapacity: true)
      }
      while let row = try rows.next() {
        let date: String = row[0]
        let rowKey = String(date.prefix(width))
        if rowKey != key {
          close()
          if groups.count > limit { return groups }
          key = rowKey
        }
        amounts.append(row[1])
      }
      close()
      return groups
    }
  }

  /// The last group of a page of medians and whether groups follow it: from the groups'
  /// sizes in the daily statistics, as many groups as `limit` and `medianRowsPerPage` allow
  /// (one department), and at least one.
  func medianPageEnd(
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    after: String?,
    limit: Int
  ) async throws -> (key: String, more: Bool)? {
    let query = AnalyticsSQL.groupSizes(grouping, filter, after: after)
    // A department's sales are read through its employees (every one of them, whatever the
    // range, a seek each): one department per page, and half the sales when one department
    // filters, whose reads cost about twice as much per sale (docs/aggregates-10m.md).
    let budget = self.configuration.medianRowsPerPage / (filter.department == nil ? 1 : 2)
    let maximumGroups = grouping == .department ? 1 : limit
    return try await self.read(.heavy, statement: true) { db in
      let rows = try Row.fetchCursor(db, sql: query.sql, arguments: query.arguments)
      var page = MedianPageEnd(limit: maximumGroups, budget: budget)
      while let row = try rows.next(), page.take(row[0], size: row[1]) {}
      return page.end
    }
  }
}
