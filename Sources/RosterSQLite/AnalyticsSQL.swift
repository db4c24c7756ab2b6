internal import GRDB
internal import RosterDomain

// MARK: Custom aggregates

/// The exact median: keeps every value, sorts once at the end.
struct MedianAggregate: DatabaseAggregate {
  var values: [Double] = []

  mutating func step(_ dbValues: [DatabaseValue]) {
    if let value = Double.fromDatabaseValue(dbValues[0]) { self.values.append(value) }
  }

  func finalize() -> (any DatabaseValueConvertible)? {
    guard !self.values.isEmpty else { return nil }
    let sorted = self.values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
  }
}

/// The population standard deviation, by Welford's method (stable in one pass).
struct StandardDeviationAggregate: DatabaseAggregate {
  var count = 0.0
  var mean = 0.0
  var squares = 0.0

  mutating func step(_ dbValues: [DatabaseValue]) {
    guard let value = Double.fromDatabaseValue(dbValues[0]) else { return }
    self.count += 1
    let delta = value - self.mean
    self.mean += delta / self.count
    self.squares += delta * (value - self.mean)
  }

  func finalize() -> (any DatabaseValueConvertible)? {
    self.count == 0 ? nil : (self.squares / self.count).squareRoot()
  }
}

extension SQLiteStore {
  /// Registers `roster_median` and `roster_stddev` on a connection.
  static func addAggregates(_ db: Database) {
    db.add(
      function: DatabaseFunction(
        "roster_median",
        argumentCount: 1,
        pure: true,
        aggregate: MedianAggregate.self
      )
    )
    db.add(
      function: DatabaseFunction(
        "roster_stddev",
        argumentCount: 1,
        pure: true,
        aggregate: StandardDeviationAggregate.self
      )
    )
  }
}

/// The SQL behind every analytics read, in one place so the query-plan test checks exactly
/// what the store runs.
enum AnalyticsSQL {
  /// The ids of a department's employees, from `employees_by_dept_active_start` alone.
  static let departmentEmployees = "SELECT id FROM employees WHERE department = ?"

  static let departments = """
    SELECT department, headcount, active_count, vacation_days_total
    FROM department_stats ORDER BY department
    """

  static let department = """
    SELECT department, headcount, active_count, vacation_days_total
    FROM department_stats WHERE department = ?
    """

  static let employeeSales = "SELECT sales_count, sales_total_cents FROM employees WHERE guid = ?"

  static let employeeMonths = """
    SELECT substr(day, 1, 7) AS m, sum(count), sum(total_cents) FROM sales_daily
    WHERE employee_id = ? GROUP BY m ORDER BY m
    """

  static let departmentMonths = """
    SELECT month, count, total_cents FROM sales_monthly_department
    WHERE department = ? ORDER BY month
    """

  static let everyoneMonths = """
    SELECT month, count, total_cents FROM sales_monthly WHERE count > 0 ORDER BY month
    """

  /// Positions in a JSON array of `[guid, cents, date]` whose guid has no employee.
  static let unknownSaleEmployees = """
    SELECT j.key FROM json_each(?) j
    WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.guid = j.value ->> 0)
    ORDER BY j.key
    """

  /// Inserts the sales of a JSON array of `[guid, cents, date]`, in array order, skipping
  /// unknown guids.
  static let insertSales = """
    INSERT INTO sales (employee_id, amount_cents, date)
    SELECT e.id, j.value ->> 1, j.value ->> 2 FROM json_each(?) j
    JOIN employees e ON e.guid = j.value ->> 0
    ORDER BY j.key
    """

  /// Logs the inserts of `insertSales`: entity, kind, fields, author, time, the array, then
  /// on whose behalf.
  static let logSales = """
    INSERT INTO change_log (entity, guid, kind, fields, author, time, on_behalf_of)
    SELECT ?1, e.guid, ?2, ?3, ?4, ?5, ?7 FROM json_each(?6) j
    JOIN employees e ON e.guid = j.value ->> 0
    ORDER BY j.key
    """

  static let monthVersion = "SELECT version FROM sales_monthly WHERE month = ?"

  static let employeeDays = """
    SELECT day, count, total_cents FROM sales_daily
    WHERE employee_id = ? AND day BETWEEN ? AND ? ORDER BY day
    """

  static let departmentDays = """
    SELECT day, count, total_cents FROM sales_daily_department
    WHERE day BETWEEN ? AND ? AND department = ? ORDER BY day
    """

  static let everyoneDays = """
    SELECT day, sum(count), sum(total_cents) FROM sales_daily_department
    WHERE day BETWEEN ? AND ? GROUP BY day ORDER BY day
    """

  /// The raw query for `aggregateEmployees` (the counters serve COUNT, SUM and AVG when only
  /// a department filters).
  static func aggregateEmployees(
    _ function: AggregateFunction,
    key: String,
    _ filter: EmployeeFilter,
    after: String? = nil
  ) -> (sql: String, arguments: StatementArguments) {
    var (terms, arguments) = EmployeeSQL.filterTerms(filter)
    if let after {
      terms.append("(\(key)) > ?")
      arguments.append(after)
    }
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    let value = SQLiteStore.aggregateExpression(function, column: "e.vacation_days")
    return (
      "SELECT \(key) AS k, \(value) FROM employees e\(whereClause) GROUP BY k ORDER BY k",
      StatementArguments(arguments.map(Optional.some))
    )
  }

  /// COUNT, SUM and AVG need only counts and totals, which the rollups keep.
  static let additive: Set<AggregateFunction> = [.count, .sum, .average]

  /// The query for `aggregateSales`: COUNT, SUM and AVG from the monthly department rollups
  /// when the range is whole months and no employee is named, from the employee's daily
  /// rollups when one is; every function but the median from the daily statistics per
  /// department when no employee is named; from raw sales otherwise (the median, and groups
  /// by employee).
  ///
  /// With `after`, only groups whose key sorts after it: the term filters rows by their
  /// group's key before grouping, so a page never aggregates the groups before it.
  static func aggregateSales(
    _ function: AggregateFunction,
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    after: String? = nil,
    employeesByDate: Bool = false
  ) throws -> (sql: String, arguments: StatementArguments) {
    if grouping == .active {
      throw StoreError(.invalidArgument, "grouping by active applies to employees, not sales")
    }
    var terms: [String] = []
    var arguments: [any DatabaseValueConvertible] = []
    var keyAfter = after
    var dates = (from: filter.fromDate, to: filter.toDate)
    func finish(_ key: String, _ value: String, _ from: String) -> (String, StatementArguments) {
      if let after = keyAfter {
        terms.append("(\(key)) > ?")
        arguments.append(after)
      }
      let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
      return (
        "SELECT \(key) AS k, \(value) FROM \(from)\(whereClause) GROUP BY k ORDER BY k",
        StatementArguments(arguments.map(Optional.some))
      )
    }
    /// The filter's department and date range, on these columns (`months` compares months).
    func scope(department: String, date: String, months: Bool = false) {
      let from = months ? dates.from.map { String($0.prefix(7)) } : dates.from
      let to = months ? dates.to.map { String($0.prefix(7)) } : dates.to
      for (term, value) in [
        ("\(department) = ?", filter.department), ("\(date) >= ?", from), ("\(date) <= ?", to),
      ] {
        if let value {
          terms.append(term)
          arguments.append(value)
        }
      }
    }
    let wholeMonths = filter.coversWholeMonths
    if additive.contains(function), filter.employeeGUID == nil, wholeMonths,
      [.none, .department, .year, .month].contains(grouping)
    {
      scope(department: "department", date: "month", months: true)
      let key = [
        "none": "''", "department": "department", "year": "substr(month, 1, 4)",
        "month": "month",
      ][grouping.rawValue]!
      return finish(key, Self.rolledUp(function), "sales_monthly_department")
    }
    if additive.contains(function), let guid = filter.employeeGUID,
      [.none, .employee, .year, .month, .day].contains(grouping)
    {
      terms.append("e.guid = ?")
      arguments.append(guid)
      scope(department: "e.department", date: "d.day")
      let key = [
        "none": "''", "employee": "e.guid", "year": "substr(d.day, 1, 4)",
        "month": "substr(d.day, 1, 7)", "day": "d.day",
      ][grouping.rawValue]!
      return finish(
        key,
        Self.rolledUp(function),
        "sales_daily d JOIN employees e ON e.id = d.employee_id"
      )
    }
    if function != .median, filter.employeeGUID == nil,
      [.none, .department, .year, .month, .day].contains(grouping)
    {
      scope(department: "department", date: "day")
      let key = [
        "none": "''", "department": "department", "year": "substr(day, 1, 4)",
        "month": "substr(day, 1, 7)", "day": "day",
      ][grouping.rawValue]!
      return finish(key, Self.fromDailyStatistics(function), "sales_daily_department")
    }
    // By employee, the guid order must drive (see below), not the department's index, unless
    // the range's sales do.
    let walksEmployees = grouping == .employee && !employeesByDate
    let keyedByDate = [.year, .month, .day].contains(grouping)
    if keyedByDate {
      dates = filter.pageDates(after: after, through: nil)
      keyAfter = nil
    }
    scope(department: walksEmployees ? "+e.department" : "e.department", date: "s.date")
    if let guid = filter.employeeGUID {
      terms.append("e.guid = ?")
      arguments.append(guid)
    }
    let key = [
      "none": "''", "department": "e.department", "employee": "e.guid",
      "year": "substr(s.date, 1, 4)", "month": "substr(s.date, 1, 7)",
      "day": "s.date",
    ][grouping.rawValue]!
    let value = SQLiteStore.aggregateExpression(function, column: "s.amount_cents")
    // By employee or department, the employees are walked in that order (CROSS JOIN fixes
    // the loop order), each with their sales from `sales_by_employee_date`: a page reads its
    // own groups only. By employee over a range with few sales (`employeesByDate`), the
    // range's sales drive instead and their groups are sorted: a walk would visit many
    // employees with no sale in the range for each group it finds.
    // Without a department or an employee, the employee is not needed at all: every sale has
    // one (the foreign key), and `sales_by_date` holds the date and amount.
    let from =
      if grouping == .employee && employeesByDate {
        "sales s INDEXED BY sales_by_date CROSS JOIN employees e ON e.id = s.employee_id"
      } else if grouping == .employee || grouping == .department {
        "employees e CROSS JOIN sales s ON s.employee_id = e.id"
      } else if filter.department == nil, filter.employeeGUID == nil, grouping != .department {
        "sales s"
      } else {
        "sales s JOIN employees e ON e.id = s.employee_id"
      }
    return finish(key, value, from)
  }

  /// The dates, amounts and employees of a page of medians keyed by date, in date order from
  /// `sales_by_date` alone (`SQLiteStore.mediansInDateOrder`): every department's.
  static func amountsInDateOrder(
    _ filter: SalesFilter,
    after: String?,
    through last: String?
  ) -> (sql: String, arguments: StatementArguments) {
    let dates = filter.pageDates(after: after, through: last)
    var terms: [String] = []
    var arguments: StatementArguments = []
    for (term, value) in [("s.date >= ?", dates.from), ("s.date <= ?", dates.to)] {
      if let value {
        terms.append(term)
        arguments += [value]
      }
    }
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    return (
      "SELECT s.date, s.amount_cents, s.employee_id FROM sales s INDEXED BY sales_by_date\(whereClause) ORDER BY s.date",
      arguments
    )
  }

  /// The sales of a range per department from `sales_daily_department`, at most
  /// `employeeGroupsRows + 1` rows: what chooses how a page of groups by employee is read.
  static let rangeSales = """
    SELECT department, count FROM sales_daily_department WHERE day >= ? AND day <= ?
    LIMIT \(SQLiteStore.employeeGroupsRows + 1)
    """

  /// Each group's sale count from `sales_daily_department`, in key order, for the groups of
  /// `grouping` (department, year, month or day) after `after` that `filter` selects.
  static func groupSizes(
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter,
    after: String?
  ) -> (sql: String, arguments: StatementArguments) {
    let key = [
      "department": "department", "year": "substr(day, 1, 4)", "month": "substr(day, 1, 7)",
      "day": "day",
    ][grouping.rawValue]!
    var terms: [String] = []
    var arguments: [any DatabaseValueConvertible] = []
    let dates =
      grouping == .department
      ? (from: filter.fromDate, to: filter.toDate)
      : filter.pageDates(after: after, through: nil)
    for (term, value) in [
      ("department = ?", filter.department), ("day >= ?", dates.from), ("day <= ?", dates.to),
      ("\(key) > ?", grouping == .department ? after : nil),
    ] {
      if let value {
        terms.append(term)
        arguments.append(value)
      }
    }
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    return (
      "SELECT \(key), sum(count) FROM sales_daily_department\(whereClause) GROUP BY 1 ORDER BY 1",
      StatementArguments(arguments)
    )
  }

  /// Any function but the median from rows of `sales_daily_department`.
  static func fromDailyStatistics(_ function: AggregateFunction) -> String {
    switch function {
    case .count, .sum, .average: Self.rolledUp(function)
    case .minimum: "min(min_cents)"
    case .maximum: "max(max_cents)"
    case .standardDeviation:
      // Population variance as E[x²] - E[x]², from sums kept exactly in integers.
      "sqrt(max(0, total(squares) / sum(count) - (total(total_cents) / sum(count)) * (total(total_cents) / sum(count))))"
    case .median: preconditionFailure("the median needs every value")
    }
  }

  /// COUNT, SUM or AVG from rollup rows with `count` and `total_cents`.
  static func rolledUp(_ function: AggregateFunction) -> String {
    switch function {
    case .count: "sum(count)"
    case .sum: "total(total_cents)"
    default: "total(total_cents) / sum(count)"
    }
  }

}
