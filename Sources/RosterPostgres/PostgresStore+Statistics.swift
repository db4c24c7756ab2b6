internal import PostgresNIO
internal import RosterDomain

extension PostgresStore {
  /// An aggregate from the daily statistics per department, for every function but the
  /// median, without an employee, grouped by nothing, department, year, month or day.
  func aggregateFromDailyStatistics(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage {
    var builder = SQLBuilder()
    let key = Self.dailyKey(grouping)
    var terms = Self.dailyTerms(filter, &builder)
    if let after = page.after { terms.append("(\(key)) > \(builder.bind(after))") }
    let value: String =
      switch function {
      case .count, .sum, .average: Self.rolledUp(function)
      case .minimum: "min(min_cents)::float8"
      case .maximum: "max(max_cents)::float8"
      default:
        // Population variance as E[x²] - E[x]², from sums kept exactly.
        "sqrt(greatest(0, sum(squares) / sum(count) - (sum(total_cents)::numeric / sum(count)) ^ 2))::float8"
      }
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    builder.sql = """
      SELECT \(key) AS k, \(value) FROM sales_daily_department\(whereClause)
      GROUP BY 1 ORDER BY 1 LIMIT \(page.limit + 1)
      """
    let query = builder.query
    let rows = try await self.heavy { try await $0.rows(query) }
    return AggregatePage(cutting: try Self.values(rows), grouping: grouping, page: page)
  }

  /// Medians of the whole range or of each department, from the amount buckets, in one
  /// snapshot: a few thousand bucket counts and one bucket's amounts per group.
  func medianFromBuckets(
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage {
    return try await self.heavy(transaction: true) { read -> AggregatePage in
      guard grouping == .department else {
        let median = try await Self.medianFromBuckets(read, filter)
        return AggregatePage(
          cutting: median.map { [AggregateValue(key: "", value: $0)] } ?? [],
          grouping: .none,
          page: page
        )
      }
      let limit = min(page.limit, AmountBuckets.mediansPerPage)
      var builder = SQLBuilder()
      var terms = Self.dailyTerms(filter, &builder)
      if let after = page.after { terms.append("department > \(builder.bind(after))") }
      let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
      builder.sql =
        "SELECT DISTINCT department FROM sales_daily_department\(whereClause) ORDER BY 1 LIMIT \(limit + 1)"
      let departments = try await read.rows(builder.query).map { try $0[0].decode(String.self) }
      var clock = MedianPageClock(limit: limit)
      var groups: [AggregateValue] = []
      for department in departments {
        guard clock.takeAnother() else { break }
        var scoped = filter
        scoped.department = department
        if let median = try await Self.medianFromBuckets(read, scoped) {
          groups.append(AggregateValue(key: department, value: median))
        }
      }
      return clock.page(groups, of: departments)
    }
  }

  /// The median of the sales in `filter`'s range and department, as SQLite's
  /// `medianFromBuckets`; nil when no sale matches.
  private static func medianFromBuckets(
    _ read: HeavyRead,
    _ filter: SalesFilter
  ) async throws -> Double? {
    let periods = SalesPeriods(from: filter.fromDate, to: filter.toDate)
    var counts: [Int: Int64] = [:]
    func inDepartment(_ builder: inout SQLBuilder) -> String {
      filter.department.map {
        " AND s.employee_id IN (SELECT id FROM employees WHERE department = \(builder.bind($0)))"
      } ?? ""
    }
    var queries: [SQLBuilder] = []
    for range in periods.bucketPeriods {
      var builder = SQLBuilder()
      builder.sql = """
        SELECT bucket, sum(count)::int8 FROM sales_amount_buckets
        WHERE period BETWEEN \(builder.bind(range.first)) AND \(builder.bind(range.last))\(filter.department.map { " AND department = \(builder.bind($0))" } ?? "")
        GROUP BY 1
        """
      queries.append(builder)
    }
    for days in periods.days {
      var builder = SQLBuilder()
      builder.sql = """
        SELECT \(AmountBuckets.sql("s.amount_cents")), count(*) FROM sales s
        WHERE s.date BETWEEN \(builder.bind(days.first)) AND \(builder.bind(days.last))\(inDepartment(&builder))
        GROUP BY 1
        """
      queries.append(builder)
    }
    for builder in queries {
      for row in try await read.rows(builder.query) {
        counts[Int(try row[0].decode(Int32.self)), default: 0] += try row[1].decode(Int64.self)
      }
    }
    var values: [Int64] = []
    for (bucket, offset) in AmountBuckets.middle(of: counts) {
      let amounts = AmountBuckets.amounts(in: bucket)
      if amounts.lowerBound == amounts.upperBound {
        values.append(amounts.lowerBound)
        continue
      }
      var builder = SQLBuilder()
      builder.sql = """
        SELECT s.amount_cents FROM sales s
        WHERE s.amount_cents BETWEEN \(builder.bind(amounts.lowerBound)) AND \(builder.bind(amounts.upperBound))
          AND s.date BETWEEN \(builder.bind(filter.fromDate ?? StoreLimits.earliestSaleDate))
          AND \(builder.bind(filter.toDate ?? "9999-12-31"))\(inDepartment(&builder))
        ORDER BY s.amount_cents OFFSET \(builder.bind(offset)) LIMIT 1
        """
      guard let value = try await read.row(builder.query)?[0].decode(Int64.self) else {
        throw StoreError(.unavailable, "the sales amount counts disagree with the sales; try again")
      }
      values.append(value)
    }
    return values.isEmpty ? nil : Double(values.reduce(0, +)) / Double(values.count)
  }

  /// The last group of a page of raw medians by year, month or day, and whether more follow:
  /// as many groups as `limit` and `medianRowsPerPage` allow, and at least one (their sizes
  /// from the daily statistics). The sales counted are every department's: in a department,
  /// a page reads every sale of its dates and keeps the department's (a hash of its
  /// employees), so its cost is the same whatever the department.
  func medianPageEnd(
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    after: String?,
    limit: Int
  ) async throws -> (key: String, more: Bool)? {
    guard self.configuration.medianRowsPerPage > 0 else { return nil }
    var builder = SQLBuilder()
    let key = Self.dailyKey(grouping)
    var everyone = SalesFilter()
    (everyone.fromDate, everyone.toDate) = filter.pageDates(after: after, through: nil)
    let terms = Self.dailyTerms(everyone, &builder)
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    builder.sql =
      "SELECT \(key), sum(count)::int8 FROM sales_daily_department\(whereClause) GROUP BY 1 ORDER BY 1"
    let query = builder.query
    // Heavy: its rows grow with the days in the range (about 200,000 over every date at 10M sales).
    return try await self.heavy { read in
      var page = MedianPageEnd(limit: limit, budget: self.configuration.medianRowsPerPage)
      for row in try await read.rows(query) {
        guard page.take(try row[0].decode(String.self), size: try row[1].decode(Int64.self)) else {
          break
        }
      }
      return page.end
    }
  }

  /// The group key of `grouping` on `sales_daily_department`.
  private static func dailyKey(_ grouping: AggregateGrouping) -> String {
    [
      "none": "''", "department": "department", "year": "left(day, 4)", "month": "left(day, 7)",
      "day": "day",
    ][
      grouping.rawValue
    ]!
  }

  /// The filter's department and range on `sales_daily_department`.
  private static func dailyTerms(_ filter: SalesFilter, _ builder: inout SQLBuilder) -> [String] {
    var terms: [String] = []
    if let value = filter.department { terms.append("department = \(builder.bind(value))") }
    if let value = filter.fromDate { terms.append("day >= \(builder.bind(value))") }
    if let value = filter.toDate { terms.append("day <= \(builder.bind(value))") }
    return terms
  }

  /// Groups as `(key, double)` rows.
  static func values(_ rows: [PostgresRandomAccessRow]) throws -> [AggregateValue] {
    try rows.map { row in
      AggregateValue(
        key: try row[0].decode(String.self),
        value: try row[1].decode(Double?.self) ?? 0
      )
    }
  }
}
