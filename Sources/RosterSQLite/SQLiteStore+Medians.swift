internal import GRDB
internal import RosterDomain

extension SQLiteStore {
  // MARK: Medians
  //
  // A median needs every value of its group. Of everything (in any range) or of a department,
  // it comes from the amount buckets (SQLiteStore+AmountBuckets.swift); by year, month or
  // day, from the amounts in date order, in pages bounded by `medianRowsPerPage`; by
  // employee, from each employee's sales.

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

  /// A page of medians by year, month or day (no employee), from the sales in date order
  /// (`sales_by_date` alone): each group's amounts are gathered as its rows go by and its
  /// median taken when the next group starts. The rows stream, so an interrupt (a cancel, a
  /// deadline) stops the read at once, where SQL's GROUP BY of a key the index does not hold
  /// sorts every row first.
  ///
  /// The page ends early, at a group boundary, once it has read `medianRowsPerPage` sales
  /// (`medianPageEnd`; AIP-158 lets a page hold fewer groups than asked). In a department,
  /// every sale of those dates is read and those of the department's employees (a set of
  /// their ids, read once) are kept: the same cost a sale whatever the department or the
  /// range, where walking the department's employees cost a seek for each of them before a
  /// single sale was read.
  func mediansInDateOrder(
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage {
    let width = grouping == .year ? 4 : grouping == .month ? 7 : 10
    let budget = self.configuration.medianRowsPerPage
    return try await self.read(.heavy, statement: true) { db in
      let last = budget > 0 ? try Self.medianPageEnd(db, grouping, filter, page, budget) : nil
      let query = AnalyticsSQL.amountsInDateOrder(filter, after: page.after, through: last?.key)
      let members = try filter.department.map { department in
        try Set(
          Int64.fetchCursor(db, sql: AnalyticsSQL.departmentEmployees, arguments: [department])
        )
      }
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
        if let members, !members.contains(row[2]) { continue }
        let date: String = row[0]
        let rowKey = String(date.prefix(width))
        if rowKey != key {
          close()
          if groups.count > page.limit { break }
          key = rowKey
        }
        amounts.append(row[1])
      }
      if groups.count <= page.limit { close() }
      var result = AggregatePage(cutting: groups, grouping: grouping, page: page)
      // Read through the page's last group: the next page starts after it, even when the
      // department had no sale in it.
      if let last, last.more, result.next == nil { result.next = last.key }
      return result
    }
  }

  /// The last group of a page of medians by date and whether groups follow it: from the
  /// groups' sizes in the daily statistics of every department (the sales the page reads), as
  /// many groups as the page's limit and `budget` allow, and at least one.
  static func medianPageEnd(
    _ db: Database,
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    _ page: AggregatePageRequest,
    _ budget: Int64
  ) throws -> (key: String, more: Bool)? {
    var everyone = filter
    everyone.department = nil
    let query = AnalyticsSQL.groupSizes(grouping, everyone, after: page.after)
    let rows = try Row.fetchCursor(db, sql: query.sql, arguments: query.arguments)
    var end = MedianPageEnd(limit: page.limit, budget: budget)
    while let row = try rows.next(), end.take(row[0], size: row[1]) {}
    return end.end
  }
}
