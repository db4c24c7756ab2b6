internal import Foundation
internal import PostgresNIO
public import RosterDomain

extension PostgresStore {
  // MARK: Counters

  /// An employee's number of sales and their total in cents, from the employee's counters.
  public func employeeSales(guid: String) async throws -> (count: Int64, totalCents: Int64) {
    guard
      let row = try await self.row(
        "SELECT sales_count, sales_total_cents FROM employees WHERE guid = \(guid)"
      )
    else {
      throw StoreError(.notFound, "no employee with guid '\(guid)'")
    }
    return (try row[0].decode(Int64.self), try row[1].decode(Int64.self))
  }

  // MARK: Aggregates

  /// One page of `function` over sale amounts (cents), grouped, filtered; groups by key.
  /// COUNT, SUM and AVG come from the monthly rollups when the range is whole months and no
  /// employee is named, from the employee's daily rollups when one is; without an employee,
  /// every other function but the median from the daily statistics per department, and the
  /// median of everything or of each department from the amount buckets; the rest from the
  /// sales, through their date and employee indexes, medians in bounded pages.
  public func aggregateSales(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage {
    try filter.checkRange()
    if grouping == .active {
      throw StoreError(.invalidArgument, "grouping by active applies to employees, not sales")
    }
    let additive: Set<AggregateFunction> = [.count, .sum, .average]
    let monthly =
      additive.contains(function) && filter.employeeGUID == nil && filter.coversWholeMonths
      && [.none, .department, .year, .month].contains(grouping)
    if !monthly, filter.employeeGUID == nil, grouping != .employee {
      if function != .median {
        return try await self.aggregateFromDailyStatistics(
          function,
          groupedBy: grouping,
          filter: filter,
          page: page
        )
      }
      if grouping == .none || grouping == .department {
        return try await self.medianFromBuckets(groupedBy: grouping, filter: filter, page: page)
      }
    }
    // Medians by year, month or day read every value of their groups: a page ends early, at
    // a group boundary, once it holds `medianRowsPerPage` sales.
    var last: (key: String, more: Bool)?
    if function == .median, filter.employeeGUID == nil, grouping != .employee {
      last = try await self.medianPageEnd(grouping, filter, after: page.after, limit: page.limit)
    }
    var builder = SQLBuilder()
    var terms: [String] = []
    var heavy = false
    var keyAfter = page.after
    var dates = (from: filter.fromDate, to: filter.toDate)
    func scope(department: String, date: String, months: Bool = false) {
      let from = months ? dates.from.map { String($0.prefix(7)) } : dates.from
      let to = months ? dates.to.map { String($0.prefix(7)) } : dates.to
      if let value = filter.department { terms.append("\(department) = \(builder.bind(value))") }
      if let value = from { terms.append("\(date) >= \(builder.bind(value))") }
      if let value = to { terms.append("\(date) <= \(builder.bind(value))") }
    }
    let key: String
    let value: String
    let source: String
    if monthly {
      scope(department: "department", date: "month", months: true)
      key = ["none": "''", "department": "department", "year": "left(month, 4)", "month": "month"][
        grouping.rawValue
      ]!
      value = Self.rolledUp(function)
      source = "sales_monthly_department"
    } else if additive.contains(function), let guid = filter.employeeGUID,
      [.none, .employee, .year, .month, .day].contains(grouping)
    {
      terms.append("e.guid = \(builder.bind(guid))")
      scope(department: "e.department", date: "d.day")
      key = [
        "none": "''", "employee": "e.guid", "year": "left(d.day, 4)", "month": "left(d.day, 7)",
        "day": "d.day",
      ][
        grouping.rawValue
      ]!
      value = Self.rolledUp(function)
      source = "sales_daily d JOIN employees e ON e.id = d.employee_id"
    } else {
      heavy = true
      if [.year, .month, .day].contains(grouping) {
        dates = filter.pageDates(after: page.after, through: last?.key)
        keyAfter = nil
      }
      scope(department: "e.department", date: "s.date")
      if let guid = filter.employeeGUID { terms.append("e.guid = \(builder.bind(guid))") }
      key = [
        "none": "''", "department": "e.department", "employee": "e.guid", "year": "left(s.date, 4)",
        "month": "left(s.date, 7)", "day": "s.date",
      ][grouping.rawValue]!
      value = Self.aggregate(function, column: "s.amount_cents")
      let needsEmployee =
        filter.department != nil || filter.employeeGUID != nil
        || grouping == .department || grouping == .employee
      source = needsEmployee ? "sales s JOIN employees e ON e.id = s.employee_id" : "sales s"
    }
    if let after = keyAfter { terms.append("(\(key)) > \(builder.bind(after))") }
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    builder.sql =
      "SELECT \(key) AS k, \(value) FROM \(source)\(whereClause) GROUP BY 1 ORDER BY 1 LIMIT \(page.limit + 1)"
    // A department's medians by date read every sale of the page's dates (`medianPageEnd`
    // counts them all) and keep the department's through a hash of its employees: the
    // planner's nested loop, which looks up every sale's employee, was several times slower
    // (docs/performance.md, "Reads as a client sees them").
    let hashJoin =
      function == .median && filter.employeeGUID == nil && filter.department != nil
      && [.year, .month, .day].contains(grouping)
    let groups = try await self.groups(builder.query, heavy: heavy, hashJoin: hashJoin)
    var result = AggregatePage(cutting: groups, grouping: grouping, page: page)
    // Read through the page's last group: the next page starts after it, even when the
    // department had no sale in it.
    if let last, last.more, result.next == nil { result.next = last.key }
    return result
  }

  /// One page of `function` over vacation days (or a count of employees), grouped by
  /// nothing, department or active, with the List filters.
  public func aggregateEmployees(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: EmployeeFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage {
    let key: String
    switch grouping {
    case .none: key = "''"
    case .department: key = "e.department"
    case .active: key = "CASE WHEN e.active THEN 'true' ELSE 'false' END"
    default:
      throw StoreError(
        .invalidArgument,
        "grouping by \(grouping.rawValue) applies to sales; employees group by none, department or active"
      )
    }
    var builder = SQLBuilder()
    var terms: [String]
    let value: String
    let source: String
    let heavy: Bool
    if grouping != .active && filter.nameContains == nil && filter.active == nil
      && [.count, .sum, .average].contains(function)
    {
      // The department counters answer without visiting an employee.
      terms = filter.department.map { ["e.department = \(builder.bind($0))"] } ?? []
      value = [
        "count": "sum(headcount)::float8", "sum": "sum(vacation_days_total)::float8",
        "average": "sum(vacation_days_total)::float8 / nullif(sum(headcount), 0)",
      ][function.rawValue]!
      source = "department_stats e"
      heavy = false
    } else {
      terms = PostgresEmployeeSQL.filterTerms(filter, into: &builder)
      value = Self.aggregate(function, column: "e.vacation_days")
      source = "employees e"
      heavy = true
    }
    if let after = page.after { terms.append("(\(key)) > \(builder.bind(after))") }
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    builder.sql =
      "SELECT \(key) AS k, \(value) FROM \(source)\(whereClause) GROUP BY 1 ORDER BY 1 LIMIT \(page.limit + 1)"
    return AggregatePage(
      cutting: try await self.groups(builder.query, heavy: heavy),
      grouping: grouping,
      page: page
    )
  }

  /// The groups `query` returns; a query over raw rows runs as a heavy read.
  private func groups(
    _ query: PostgresQuery,
    heavy: Bool,
    hashJoin: Bool = false
  ) async throws -> [AggregateValue] {
    let rows =
      heavy
      ? try await self.heavy(transaction: hashJoin) { read in
        // SET LOCAL ends with the heavy read's transaction.
        if hashJoin { _ = try await read.rows("SET LOCAL enable_nestloop = off") }
        return try await read.rows(query)
      }
      : try await self.rows(query)
    return try Self.values(rows)
  }

  /// An aggregate over a column, as a double. The median is exact: the middle value, or the
  /// mean of the middle two (`percentile_cont`), as on SQLite.
  static func aggregate(_ function: AggregateFunction, column: String) -> String {
    switch function {
    case .count: "count(*)::float8"
    case .sum: "sum(\(column))::float8"
    case .average: "avg(\(column))::float8"
    case .minimum: "min(\(column))::float8"
    case .maximum: "max(\(column))::float8"
    case .median: "percentile_cont(0.5) WITHIN GROUP (ORDER BY \(column))"
    case .standardDeviation: "stddev_pop(\(column))::float8"
    }
  }

  /// COUNT, SUM or AVG from rollup rows with `count` and `total_cents`.
  static func rolledUp(_ function: AggregateFunction) -> String {
    switch function {
    case .count: "sum(count)::float8"
    case .sum: "sum(total_cents)::float8"
    default: "sum(total_cents)::float8 / nullif(sum(count), 0)"
    }
  }

  // MARK: Calendar

  /// Each year with its count and amount and its months', from the rollups; and, given a
  /// year and a month, that month's days.
  public func salesCalendar(
    scope: SalesScope,
    year: Int?,
    month: Int?
  ) async throws -> SalesCalendar {
    try SalesCalendar.check(year: year, month: month)
    let monthText = year.flatMap { year in month.map { String(format: "%04d-%02d", year, $0) } }
    let (first, last) = (monthText.map { $0 + "-01" } ?? "", monthText.map { $0 + "-31" } ?? "")
    let months: [PostgresRandomAccessRow]
    var days: [PostgresRandomAccessRow] = []
    switch scope {
    case .employee(let guid):
      guard let row = try await self.row("SELECT id FROM employees WHERE guid = \(guid)") else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      let id = try row[0].decode(Int64.self)
      months = try await self.rows(
        """
        SELECT left(day, 7), sum(count)::int8, sum(total_cents)::int8 FROM sales_daily
        WHERE employee_id = \(id) GROUP BY 1 ORDER BY 1
        """
      )
      if monthText != nil {
        days = try await self.rows(
          """
          SELECT day, count, total_cents FROM sales_daily
          WHERE employee_id = \(id) AND day BETWEEN \(first) AND \(last) ORDER BY day
          """
        )
      }
    case .department(let department):
      months = try await self.rows(
        """
        SELECT month, count, total_cents FROM sales_monthly_department
        WHERE department = \(department) ORDER BY month
        """
      )
      if monthText != nil {
        days = try await self.heavy {
          try await $0.rows(
            """
            SELECT s.date, count(*), sum(s.amount_cents)::int8 FROM sales s
            JOIN employees e ON e.id = s.employee_id
            WHERE e.department = \(department) AND s.date BETWEEN \(first) AND \(last)
            GROUP BY 1 ORDER BY 1
            """
          )
        }
      }
    case .everyone:
      months = try await self.rows(
        "SELECT month, count, total_cents FROM sales_monthly WHERE count > 0 ORDER BY month"
      )
      if monthText != nil {
        days = try await self.heavy {
          try await $0.rows(
            """
            SELECT date, count(*), sum(amount_cents)::int8 FROM sales
            WHERE date BETWEEN \(first) AND \(last) GROUP BY 1 ORDER BY 1
            """
          )
        }
      }
    }
    var calendar = SalesCalendar()
    for row in months {
      calendar.add(
        month: try row[0].decode(String.self),
        count: try row[1].decode(Int64.self),
        amountCents: try row[2].decode(Int64.self)
      )
    }
    calendar.days = try days.map { row in
      SalesCalendar.Period(
        number: Int(try row[0].decode(String.self).suffix(2)) ?? 0,
        count: try row[1].decode(Int64.self),
        amountCents: try row[2].decode(Int64.self)
      )
    }
    return calendar
  }
}
