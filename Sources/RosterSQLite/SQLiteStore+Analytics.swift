internal import Foundation
internal import GRDB
public import RosterDomain

extension SQLiteStore {
  // MARK: Counters

  /// Every department with its counters, sorted by department. Reads the counters the
  /// writes keep, never the employees.
  public func departmentCounts() async throws -> [DepartmentCounts] {
    try await self.read(.interactive, statement: true) { db in
      try Row.fetchAll(db.cachedStatement(sql: AnalyticsSQL.departments)).map {
        DepartmentCounts(
          department: $0[0],
          headcount: $0[1],
          active: $0[2],
          vacationDaysTotal: $0[3]
        )
      }
    }
  }

  /// One department's counters.
  ///
  /// - Throws: `notFound` for a department with no employees.
  public func departmentCounts(_ department: String) async throws -> DepartmentCounts {
    let counts = try await self.read(.interactive, statement: true) { db in
      try Row.fetchOne(
        db.cachedStatement(sql: AnalyticsSQL.department),
        arguments: [department]
      ).map {
        DepartmentCounts(
          department: $0[0],
          headcount: $0[1],
          active: $0[2],
          vacationDaysTotal: $0[3]
        )
      }
    }
    guard let counts else {
      throw StoreError(.notFound, "no department \(ClientText.quoted(department))")
    }
    return counts
  }

  /// An employee's number of sales and their total amount in cents, from the employee's
  /// counters.
  ///
  /// - Throws: `notFound` for an unknown guid.
  public func employeeSales(guid: String) async throws -> (count: Int64, totalCents: Int64) {
    let sales = try await self.read(.interactive, statement: true) { db in
      try Row.fetchOne(
        db.cachedStatement(sql: AnalyticsSQL.employeeSales),
        arguments: [guid]
      ).map { (count: $0[0] as Int64, cents: $0[1] as Int64) }
    }
    guard let sales else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    return (sales.count, sales.cents)
  }

  // MARK: Aggregates

  /// One page of `function` over sale amounts, grouped, with filters; groups sorted by key.
  /// In the heavy lane: the raw queries visit every matching sale.
  ///
  /// - Throws: `invalidArgument` for grouping by `active`, or a bad date range.
  public func aggregateSales(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter,
    page: AggregatePageRequest = AggregatePageRequest()
  ) async throws -> AggregatePage {
    try filter.checkRange()
    if function == .median, filter.employeeGUID == nil, grouping == .none || grouping == .department
    {
      return try await self.medianFromBuckets(groupedBy: grouping, filter: filter, page: page)
    }
    if function == .median, filter.employeeGUID == nil, [.year, .month, .day].contains(grouping) {
      return try await self.mediansInDateOrder(grouping, filter, page: page)
    }
    // By employee, how the page is read is chosen in the same read as the page.
    let groups = try await self.read(.heavy, statement: true) { db in
      let byDate =
        grouping == .employee && filter.employeeGUID == nil
        ? try Self.fewSalesForEmployeeGroups(db, filter, limit: page.limit) : false
      let query = try AnalyticsSQL.aggregateSales(
        function,
        grouping,
        filter,
        after: page.after,
        employeesByDate: byDate
      )
      return try Self.groups(db, query, limit: page.limit)
    }
    return AggregatePage(cutting: groups, grouping: grouping, page: page)
  }

  /// One page of `function` over `vacation_days` (or a count of employees), grouped by
  /// nothing, department or active, with the List filters; groups sorted by key.
  ///
  /// - Throws: `invalidArgument` for a grouping that does not apply to employees.
  public func aggregateEmployees(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: EmployeeFilter,
    page: AggregatePageRequest = AggregatePageRequest()
  ) async throws -> AggregatePage {
    let key: String
    switch grouping {
    case .none: key = "''"
    case .department: key = "e.department"
    case .active: key = "CASE e.active WHEN 1 THEN 'true' ELSE 'false' END"
    default:
      throw StoreError(
        .invalidArgument,
        "grouping by \(grouping.rawValue) applies to sales; employees group by none, department or active"
      )
    }
    if grouping != .active && filter.nameContains == nil && filter.active == nil
      && [.count, .sum, .average].contains(function)
    {
      var groups = try await self.aggregateFromCounters(
        function,
        byDepartment: grouping == .department,
        filter: filter
      )
      if let after = page.after { groups = groups.filter { $0.key > after } }
      return AggregatePage(
        cutting: Array(groups.prefix(page.limit + 1)),
        grouping: grouping,
        page: page
      )
    }
    let query = AnalyticsSQL.aggregateEmployees(function, key: key, filter, after: page.after)
    let groups = try await self.aggregateGroups(query, limit: page.limit)
    return AggregatePage(cutting: groups, grouping: grouping, page: page)
  }

  /// The most `sales_daily_department` rows (days × departments) a range may span for its
  /// sales to drive a page of groups by employee.
  static let employeeGroupsRows = 2_000

  /// Whether a page of groups by employee in `filter`'s range is read fastest from the
  /// range's sales, sorted by employee, rather than by walking every employee in guid order:
  /// the walk visits about `limit × employees ÷ groups` employees to fill a page, where the
  /// range's groups are at most its sales in the department; the sales cost a row each
  /// (every department's, in the range). From the daily statistics and the department
  /// counters, a few thousand rows at most.
  static func fewSalesForEmployeeGroups(
    _ db: Database,
    _ filter: SalesFilter,
    limit: Int
  ) throws -> Bool {
    guard let from = filter.fromDate, let to = filter.toDate else { return false }
    let days = try Row.fetchAll(db, sql: AnalyticsSQL.rangeSales, arguments: [from, to])
    guard days.count <= Self.employeeGroupsRows else { return false }
    var sales: Int64 = 0
    var inScope: Int64 = 0
    for row in days {
      let count: Int64 = row[1]
      sales += count
      if filter.department == nil || filter.department == row[0] { inScope += count }
    }
    let employees = try Row.fetchAll(db, sql: AnalyticsSQL.departments)
      .reduce(Int64(0)) { $0 + ($1[1] as Int64) }
    return sales * max(1, inScope) < Int64(limit + 1) * employees
  }

  /// Up to `limit + 1` groups of an aggregate query, in the heavy lane.
  private func aggregateGroups(
    _ query: (sql: String, arguments: StatementArguments),
    limit: Int
  ) async throws -> [AggregateValue] {
    try await self.read(.heavy, statement: true) { db in try Self.groups(db, query, limit: limit) }
  }

  /// Up to `limit + 1` groups of an aggregate query.
  private static func groups(
    _ db: Database,
    _ query: (sql: String, arguments: StatementArguments),
    limit: Int
  ) throws -> [AggregateValue] {
    try Row.fetchAll(db, sql: query.sql + " LIMIT \(limit + 1)", arguments: query.arguments)
      .map { AggregateValue(key: $0[0], value: $0[1] ?? 0) }
  }

  /// COUNT, SUM and AVG of vacation days by department (or overall) from the counters.
  private func aggregateFromCounters(
    _ function: AggregateFunction,
    byDepartment: Bool,
    filter: EmployeeFilter
  ) async throws -> [AggregateValue] {
    var counts = try await self.departmentCounts()
    if let department = filter.department { counts = counts.filter { $0.department == department } }
    func value(_ headcount: Int64, _ total: Int64) -> Double {
      switch function {
      case .count: Double(headcount)
      case .sum: Double(total)
      default: headcount == 0 ? 0 : Double(total) / Double(headcount)
      }
    }
    if byDepartment {
      return counts.map {
        AggregateValue(key: $0.department, value: value($0.headcount, $0.vacationDaysTotal))
      }
    }
    let headcount = counts.reduce(0) { $0 + $1.headcount }
    let total = counts.reduce(0) { $0 + $1.vacationDaysTotal }
    return [AggregateValue(key: "", value: value(headcount, total))]
  }

  static func aggregateExpression(_ function: AggregateFunction, column: String) -> String {
    switch function {
    case .count: return "count(*)"
    case .sum: return "total(\(column))"
    case .average: return "avg(\(column))"
    case .minimum: return "min(\(column))"
    case .maximum: return "max(\(column))"
    case .median: return "roster_median(\(column))"
    case .standardDeviation: return "roster_stddev(\(column))"
    }
  }

  // MARK: Calendar

  /// Each year with its count and amount and its months', from the rollups; and, given a
  /// year and a month, that month's days, cached until a sale of that month changes.
  ///
  /// - Throws: `invalidArgument` for a month without a year or outside 1 to 12; `notFound`
  ///   for an unknown employee.
  public func salesCalendar(
    scope: SalesScope,
    year: Int? = nil,
    month: Int? = nil
  ) async throws -> SalesCalendar {
    try SalesCalendar.check(year: year, month: month)
    // Heavy: a department's or everyone's month of days is read from raw sales.
    return try await self.read(.heavy) { db in
      let months: [Row]
      var employeeID: Int64? = nil
      switch scope {
      case .employee(let guid):
        guard
          let id = try Int64.fetchOne(
            db,
            sql: "SELECT id FROM employees WHERE guid = ?",
            arguments: [guid]
          )
        else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
        employeeID = id
        months = try Row.fetchAll(
          db,
          sql: AnalyticsSQL.employeeMonths,
          arguments: [id]
        )
      case .department(let department):
        months = try Row.fetchAll(
          db,
          sql: AnalyticsSQL.departmentMonths,
          arguments: [department]
        )
      case .everyone:
        months = try Row.fetchAll(
          db,
          sql: AnalyticsSQL.everyoneMonths
        )
      }
      var calendar = SalesCalendar()
      for row in months {
        calendar.add(month: row[0], count: row[1], amountCents: row[2])
      }
      if let year, let month {
        calendar.days = try self.days(
          db,
          scope: scope,
          employeeID: employeeID,
          year: year,
          month: month
        )
      }
      return calendar
    }
  }

  private func days(
    _ db: Database,
    scope: SalesScope,
    employeeID: Int64?,
    year: Int,
    month: Int
  ) throws -> [SalesCalendar.Period] {
    let monthText = String(format: "%04d-%02d", year, month)
    let version =
      try Int64.fetchOne(
        db,
        sql: AnalyticsSQL.monthVersion,
        arguments: [monthText]
      ) ?? 0
    let key = CalendarCache.Key(scope: scope, month: monthText)
    if let days = self.calendarCache.get(key, version: version) { return days }
    let range: StatementArguments = [monthText + "-01", monthText + "-31"]
    let rows: [Row]
    switch scope {
    case .employee:
      rows = try Row.fetchAll(
        db,
        sql: AnalyticsSQL.employeeDays,
        arguments: [employeeID] + range
      )
    case .department(let department):
      rows = try Row.fetchAll(
        db,
        sql: AnalyticsSQL.departmentDays,
        arguments: range + [department]
      )
    case .everyone:
      rows = try Row.fetchAll(
        db,
        sql: AnalyticsSQL.everyoneDays,
        arguments: range
      )
    }
    let days = rows.map { row in
      SalesCalendar.Period(
        number: Int((row[0] as String).suffix(2)) ?? 0,
        count: row[1],
        amountCents: row[2] as Int64
      )
    }
    self.calendarCache.put(key, version: version, days: days)
    return days
  }

  /// The day-breakdown cache's counters.
  public var calendarCacheStatistics: CalendarCacheStatistics {
    self.calendarCache.statistics
  }
}
