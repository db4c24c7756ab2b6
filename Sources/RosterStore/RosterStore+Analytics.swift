internal import Foundation
internal import GRDB
internal import Synchronization

/// A department's counters.
public struct DepartmentCounts: Sendable, Hashable {
  public var department: String
  public var headcount: Int64
  public var active: Int64
  public var vacationDaysTotal: Int64

  /// Mean vacation days per employee.
  public var vacationDaysAverage: Double {
    self.headcount == 0 ? 0 : Double(self.vacationDaysTotal) / Double(self.headcount)
  }
}

/// An aggregate over a column: the functions `AggregateSales` and `AggregateEmployees` take.
public enum AggregateFunction: String, Sendable, CaseIterable {
  case count, sum, average, minimum, maximum
  /// The exact median (the mean of the middle two for an even count).
  case median
  /// The population standard deviation (divides by n, not n - 1).
  case standardDeviation
}

/// How aggregate results are grouped.
public enum AggregateGrouping: String, Sendable, CaseIterable {
  case none, department, employee, year, month, day, active
}

/// One group of an aggregate: its key (empty for no grouping) and value.
public struct AggregateValue: Sendable, Hashable {
  public var key: String
  public var value: Double
}

/// Which sales an aggregate covers; nil means any.
public struct SalesFilter: Sendable, Hashable {
  public var department: String?
  public var employeeGUID: String?
  /// Inclusive `YYYY-MM-DD`.
  public var fromDate: String?
  /// Inclusive `YYYY-MM-DD`.
  public var toDate: String?

  public init(
    department: String? = nil,
    employeeGUID: String? = nil,
    fromDate: String? = nil,
    toDate: String? = nil
  ) {
    self.department = department.flatMap { $0.isEmpty ? nil : $0 }
    self.employeeGUID = employeeGUID.flatMap { $0.isEmpty ? nil : $0 }
    self.fromDate = fromDate.flatMap { $0.isEmpty ? nil : $0 }
    self.toDate = toDate.flatMap { $0.isEmpty ? nil : $0 }
  }
}

/// One sale to import.
public struct SaleRow: Sendable, Hashable {
  public var employeeGUID: String
  public var amount: Double
  public var date: String

  public init(employeeGUID: String, amount: Double, date: String) {
    self.employeeGUID = employeeGUID
    self.amount = amount
    self.date = date
  }
}

/// Sales totals by calendar period.
public struct SalesCalendar: Sendable, Hashable {
  public struct Period: Sendable, Hashable {
    /// The year, month or day number.
    public var number: Int
    public var count: Int64
    public var amount: Double
  }
  public struct Year: Sendable, Hashable {
    public var year: Period
    public var months: [Period]
  }
  public var years: [Year] = []
  /// The requested month's days, when a year and month were given.
  public var days: [Period] = []
}

/// Whose sales a calendar covers.
public enum SalesScope: Sendable, Hashable {
  case everyone
  case department(String)
  case employee(guid: String)
}

/// The day-breakdown cache's counters.
public struct CalendarCacheStatistics: Sendable, Hashable {
  public var hits = 0
  public var misses = 0
}

/// Day breakdowns of a month, computed on first request and kept with the month's version;
/// any write to a sale of that month bumps the version, which retires exactly those entries.
final class CalendarCache: Sendable {
  struct Key: Hashable {
    var scope: SalesScope
    var month: String
  }
  private struct State {
    var entries: [Key: (version: Int64, days: [SalesCalendar.Period])] = [:]
    var statistics = CalendarCacheStatistics()
  }
  private let state = Mutex(State())
  private let capacity = 10_000

  func get(_ key: Key, version: Int64) -> [SalesCalendar.Period]? {
    self.state.withLock { state in
      if let entry = state.entries[key], entry.version == version {
        state.statistics.hits += 1
        return entry.days
      }
      state.statistics.misses += 1
      return nil
    }
  }

  func put(_ key: Key, version: Int64, days: [SalesCalendar.Period]) {
    self.state.withLock { state in
      if state.entries.count >= self.capacity { state.entries.removeAll(keepingCapacity: true) }
      state.entries[key] = (version, days)
    }
  }

  var statistics: CalendarCacheStatistics { self.state.withLock { $0.statistics } }
}

extension RosterStore {
  /// The earliest sale date accepted.
  public static let earliestSaleDate = "1900-01-01"
  /// How far ahead of today a sale may be dated.
  public static let saleDaysAhead = 366

  // MARK: Counters

  /// Every department with its counters, sorted by department. Reads the counters the
  /// writes keep, never the employees.
  public func departmentCounts() throws -> [DepartmentCounts] {
    try self.readStatement { db in
      try Row.fetchAll(
        db,
        sql: AnalyticsSQL.departments
      ).map { DepartmentCounts(department: $0[0], headcount: $0[1], active: $0[2], vacationDaysTotal: $0[3]) }
    }
  }

  /// One department's counters.
  ///
  /// - Throws: `notFound` for a department with no employees.
  public func departmentCounts(_ department: String) throws -> DepartmentCounts {
    let row = try self.readStatement { db in
      try Row.fetchOne(
        db,
        sql: AnalyticsSQL.department,
        arguments: [department]
      )
    }
    guard let row else { throw StoreError(.notFound, "no department '\(department)'") }
    return DepartmentCounts(department: row[0], headcount: row[1], active: row[2], vacationDaysTotal: row[3])
  }

  /// An employee's number of sales and their total amount, from the employee's counters.
  ///
  /// - Throws: `notFound` for an unknown guid.
  public func employeeSales(guid: String) throws -> (count: Int64, total: Double) {
    let row = try self.readStatement { db in
      try Row.fetchOne(
        db,
        sql: AnalyticsSQL.employeeSales,
        arguments: [guid]
      )
    }
    guard let row else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    return (row[0], Double(row[1] as Int64) / 100)
  }

  // MARK: Aggregates

  /// `function` over sale amounts, grouped, with filters; groups sorted by key.
  ///
  /// - Throws: `invalidArgument` for grouping by `active`, or a bad date range.
  public func aggregateSales(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter
  ) throws -> [AggregateValue] {
    try Self.checkRange(from: filter.fromDate, to: filter.toDate)
    let query = try AnalyticsSQL.aggregateSales(function, grouping, filter)
    let groups = try self.readStatement { db in
      try Row.fetchAll(db, sql: query.sql, arguments: query.arguments)
        .map { AggregateValue(key: $0[0], value: $0[1] ?? 0) }
    }
    // With no grouping there is always one answer, even over no sales.
    if grouping == .none && groups.isEmpty { return [AggregateValue(key: "", value: 0)] }
    return groups
  }

  /// `function` over `vacation_days` (or a count of employees), grouped by nothing,
  /// department or active, with the List filters; groups sorted by key.
  ///
  /// - Throws: `invalidArgument` for a grouping that does not apply to employees.
  public func aggregateEmployees(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: EmployeeFilter
  ) throws -> [AggregateValue] {
    let key: String
    switch grouping {
    case .none: key = "''"
    case .department: key = "e.department"
    case .active: key = "CASE e.active WHEN 1 THEN 'true' ELSE 'false' END"
    default:
      throw StoreError(
        .invalidArgument,
        "group_by \(grouping.rawValue.uppercased()) applies to sales; employees group by NONE, DEPARTMENT or ACTIVE"
      )
    }
    if grouping != .active && filter.nameContains == nil && filter.active == nil
      && [.count, .sum, .average].contains(function)
    {
      return try self.aggregateFromCounters(function, byDepartment: grouping == .department, filter: filter)
    }
    let query = AnalyticsSQL.aggregateEmployees(function, key: key, filter)
    let groups = try self.readStatement { db in
      try Row.fetchAll(db, sql: query.sql, arguments: query.arguments)
        .map { AggregateValue(key: $0[0], value: $0[1] ?? 0) }
    }
    if grouping == .none && groups.isEmpty { return [AggregateValue(key: "", value: 0)] }
    return groups
  }

  /// COUNT, SUM and AVG of vacation days by department (or overall) from the counters.
  private func aggregateFromCounters(
    _ function: AggregateFunction,
    byDepartment: Bool,
    filter: EmployeeFilter
  ) throws -> [AggregateValue] {
    var counts = try self.departmentCounts()
    if let department = filter.department { counts = counts.filter { $0.department == department } }
    func value(_ headcount: Int64, _ total: Int64) -> Double {
      switch function {
      case .count: Double(headcount)
      case .sum: Double(total)
      default: headcount == 0 ? 0 : Double(total) / Double(headcount)
      }
    }
    if byDepartment {
      return counts.map { AggregateValue(key: $0.department, value: value($0.headcount, $0.vacationDaysTotal)) }
    }
    let headcount = counts.reduce(0) { $0 + $1.headcount }
    let total = counts.reduce(0) { $0 + $1.vacationDaysTotal }
    return [AggregateValue(key: "", value: value(headcount, total))]
  }

  static func aggregateExpression(_ function: AggregateFunction, column: String, scale: Double) -> String {
    let divide = scale == 1 ? "" : " / \(scale)"
    switch function {
    case .count: return "count(*)"
    case .sum: return "total(\(column))\(divide)"
    case .average: return "avg(\(column))\(divide)"
    case .minimum: return "min(\(column))\(divide)"
    case .maximum: return "max(\(column))\(divide)"
    case .median: return "roster_median(\(column))\(divide)"
    case .standardDeviation: return "roster_stddev(\(column))\(divide)"
    }
  }

  static func checkRange(from: String?, to: String?) throws {
    for (field, date) in [("from_date", from), ("to_date", to)] {
      if let date, !EmployeeValidation.isValidDate(date) {
        throw StoreError(.invalidArgument, "\(field) '\(date)' is not a YYYY-MM-DD date")
      }
    }
    if let from, let to, from > to {
      throw StoreError(.invalidArgument, "from_date \(from) is after to_date \(to)")
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
  ) throws -> SalesCalendar {
    if month != nil && year == nil {
      throw StoreError(.invalidArgument, "month needs a year")
    }
    if let month, !(1...12).contains(month) {
      throw StoreError(.invalidArgument, "month \(month) is not between 1 and 12")
    }
    if let year, !(1900...9999).contains(year) {
      throw StoreError(.invalidArgument, "year \(year) is not between 1900 and 9999")
    }
    return try self.read { db in
      let months: [Row]
      var employeeID: Int64? = nil
      switch scope {
      case .employee(let guid):
        guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM employees WHERE guid = ?", arguments: [guid])
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
        let text: String = row[0]
        let y = Int(text.prefix(4)) ?? 0
        let period = SalesCalendar.Period(
          number: Int(text.suffix(2)) ?? 0,
          count: row[1],
          amount: Double(row[2] as Int64) / 100
        )
        if calendar.years.last?.year.number != y {
          calendar.years.append(.init(year: .init(number: y, count: 0, amount: 0), months: []))
        }
        calendar.years[calendar.years.count - 1].months.append(period)
        calendar.years[calendar.years.count - 1].year.count += period.count
        calendar.years[calendar.years.count - 1].year.amount += period.amount
      }
      if let year, let month {
        calendar.days = try self.days(db, scope: scope, employeeID: employeeID, year: year, month: month)
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
    let version = try Int64.fetchOne(
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
        amount: Double(row[2] as Int64) / 100
      )
    }
    self.calendarCache.put(key, version: version, days: days)
    return days
  }

  /// The day-breakdown cache's counters.
  public var calendarCacheStatistics: CalendarCacheStatistics {
    self.calendarCache.statistics
  }

  // MARK: Sales writes

  /// Imports sales as they stream in, in chunks through the writer. Bad rows (an unknown
  /// employee, a negative amount, a date before 1900 or more than a year ahead) are reported
  /// with their index and reason; the good rows land.
  ///
  /// - Returns: how many were inserted, and the rejections in input order.
  public func importSales<Rows: AsyncSequence>(
    _ messages: Rows,
    context: WriteContext = WriteContext(),
    chunkRows: Int = 5_000
  ) async throws -> (inserted: Int, rejected: [ImportSummary.Rejected]) where Rows.Element == [SaleRow] {
    let latest = Self.latestSaleDate()
    var inserted = 0
    var rejected: [ImportSummary.Rejected] = []
    var chunk: [(index: Int, guid: String, cents: Int64, date: String)] = []
    var index = 0
    func flush() async throws {
      guard !chunk.isEmpty else { return }
      let rows = chunk
      chunk.removeAll(keepingCapacity: true)
      let (count, unknown) = try await self.submit(bulk: true) { db in
        try Self.insertSales(db, rows, context: context)
      }
      inserted += count
      rejected += unknown
    }
    for try await message in messages {
      for sale in message {
        defer { index += 1 }
        guard let guid = EmployeeValidation.canonicalGUID(sale.employeeGUID) else {
          rejected.append(.init(index: index, reason: "employee_guid '\(sale.employeeGUID)' is not a UUID"))
          continue
        }
        guard sale.amount.isFinite, sale.amount >= 0, sale.amount < 1e13 else {
          rejected.append(.init(index: index, reason: "amount \(sale.amount) must be zero or more"))
          continue
        }
        guard EmployeeValidation.isValidDate(sale.date) else {
          rejected.append(.init(index: index, reason: "date '\(sale.date)' is not a YYYY-MM-DD date"))
          continue
        }
        guard sale.date >= Self.earliestSaleDate, sale.date <= latest else {
          rejected.append(
            .init(index: index, reason: "date \(sale.date) is outside \(Self.earliestSaleDate) to \(latest)")
          )
          continue
        }
        chunk.append((index, guid, Int64((sale.amount * 100).rounded()), sale.date))
        if chunk.count >= chunkRows { try await flush() }
      }
    }
    try await flush()
    rejected.sort { $0.index < $1.index }
    return (inserted, rejected)
  }

  /// Inserts a chunk of checked sales with three set-based statements over one JSON array,
  /// instead of three statements per row: each statement inside the writer's savepoint
  /// copies every page it first touches to the statement journal, so per-row statements
  /// wrote each hot page (rollups, indexes, the change log) once per row.
  private static func insertSales(
    _ db: Database,
    _ rows: [(index: Int, guid: String, cents: Int64, date: String)],
    context: WriteContext
  ) throws -> (Int, [ImportSummary.Rejected]) {
    // Guids are canonical and dates checked digits, so nothing here needs escaping.
    var json = "["
    json.reserveCapacity(rows.count * 64)
    for (position, row) in rows.enumerated() {
      if position > 0 { json += "," }
      json += "[\"" + row.guid + "\"," + String(row.cents) + ",\"" + row.date + "\"]"
    }
    json += "]"
    let unknown = try Int.fetchAll(db, sql: AnalyticsSQL.unknownSaleEmployees, arguments: [json])
    try db.execute(sql: AnalyticsSQL.insertSales, arguments: [json])
    try db.execute(
      sql: AnalyticsSQL.logSales,
      arguments: [
        Change.Entity.sale.rawValue, Change.Kind.inserted.rawValue, "amount,date", context.author,
        Self.nowMillis(), json,
      ]
    )
    let rejected = unknown.map {
      ImportSummary.Rejected(index: rows[$0].index, reason: "no employee with guid '\(rows[$0].guid)'")
    }
    return (rows.count - rejected.count, rejected)
  }

  /// Deletes up to `limit` sales dated before `date`, 5,000 per transaction.
  ///
  /// - Returns: how many went, and whether more remain.
  public func deleteSales(
    before date: String,
    limit: Int,
    context: WriteContext = WriteContext()
  ) async throws -> (deleted: Int, more: Bool) {
    var deleted = 0
    while deleted < limit {
      let chunk = min(5_000, limit - deleted)
      let count = try await self.submit(bulk: true) { db in
        let rows = try Row.fetchAll(
          db,
          sql: """
            SELECT s.id, e.guid FROM sales s JOIN employees e ON e.id = s.employee_id
            WHERE s.date < ? LIMIT ?
            """,
          arguments: [date, chunk]
        )
        let delete = try db.cachedStatement(sql: "DELETE FROM sales WHERE id = ?")
        let now = Self.nowMillis()
        for row in rows {
          try delete.execute(arguments: [row[0] as Int64])
          try Self.record(
            db,
            entity: .sale,
            guid: row[1],
            kind: .deleted,
            context: context,
            timeMillis: now
          )
        }
        return rows.count
      }
      deleted += count
      if count < chunk { return (deleted, false) }
    }
    let more = try self.readStatement { db in
      try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM sales WHERE date < ?)", arguments: [date]) ?? false
    }
    return (deleted, more)
  }

  /// The latest sale date accepted: a year from today, in UTC.
  static func latestSaleDate() -> String {
    let today = Int(Date().timeIntervalSince1970 / 86_400)
    return CivilDate(dayNumber: today + Self.saleDaysAhead).text
  }

}

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

extension RosterStore {
  /// Registers `roster_median` and `roster_stddev` on a connection.
  static func addAggregates(_ db: Database) {
    db.add(function: DatabaseFunction("roster_median", argumentCount: 1, pure: true, aggregate: MedianAggregate.self))
    db.add(function: DatabaseFunction("roster_stddev", argumentCount: 1, pure: true, aggregate: StandardDeviationAggregate.self))
  }
}

/// The SQL behind every analytics read, in one place so the query-plan test checks exactly
/// what the store runs.
enum AnalyticsSQL {
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

  /// Logs the inserts of `insertSales`: entity, kind, fields, author, time, then the array.
  static let logSales = """
    INSERT INTO change_log (entity, guid, kind, fields, author, time)
    SELECT ?1, e.guid, ?2, ?3, ?4, ?5 FROM json_each(?6) j
    JOIN employees e ON e.guid = j.value ->> 0
    ORDER BY j.key
    """

  static let monthVersion = "SELECT version FROM sales_monthly WHERE month = ?"

  static let employeeDays = """
    SELECT day, count, total_cents FROM sales_daily
    WHERE employee_id = ? AND day BETWEEN ? AND ? ORDER BY day
    """

  static let departmentDays = """
    SELECT s.date, count(*), sum(s.amount_cents) FROM sales s
    JOIN employees e ON e.id = s.employee_id
    WHERE s.date BETWEEN ? AND ? AND e.department = ? GROUP BY s.date ORDER BY s.date
    """

  static let everyoneDays = """
    SELECT date, count(*), sum(amount_cents) FROM sales
    WHERE date BETWEEN ? AND ? GROUP BY date ORDER BY date
    """

  /// The raw query for `aggregateEmployees` (the counters serve COUNT, SUM and AVG when only
  /// a department filters).
  static func aggregateEmployees(
    _ function: AggregateFunction,
    key: String,
    _ filter: EmployeeFilter
  ) -> (sql: String, arguments: StatementArguments) {
    let (terms, arguments) = EmployeeSQL.filterTerms(filter, ordered: false)
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    let value = RosterStore.aggregateExpression(function, column: "e.vacation_days", scale: 1)
    return (
      "SELECT \(key) AS k, \(value) FROM employees e\(whereClause) GROUP BY k ORDER BY k",
      StatementArguments(arguments.map(Optional.some))
    )
  }

  /// COUNT, SUM and AVG need only counts and totals, which the rollups keep.
  static let additive: Set<AggregateFunction> = [.count, .sum, .average]

  /// The query for `aggregateSales`: from the monthly department rollups when the range is
  /// whole months and no employee is named; from the employee's daily rollups when one is;
  /// from raw sales otherwise (MEDIAN, STDDEV, MIN, MAX, or ranges that split a month).
  static func aggregateSales(
    _ function: AggregateFunction,
    _ grouping: AggregateGrouping,
    _ filter: SalesFilter
  ) throws -> (sql: String, arguments: StatementArguments) {
    if grouping == .active {
      throw StoreError(.invalidArgument, "group_by ACTIVE applies to employees, not sales")
    }
    var terms: [String] = []
    var arguments: [any DatabaseValueConvertible] = []
    func finish(_ key: String, _ value: String, _ from: String) -> (String, StatementArguments) {
      let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
      return (
        "SELECT \(key) AS k, \(value) FROM \(from)\(whereClause) GROUP BY k ORDER BY k",
        StatementArguments(arguments.map(Optional.some))
      )
    }
    let wholeMonths = (filter.fromDate.map { $0.hasSuffix("-01") } ?? true)
      && (filter.toDate.map { $0 == Self.lastDay(ofMonth: $0) } ?? true)
    if additive.contains(function), filter.employeeGUID == nil, wholeMonths,
      [.none, .department, .year, .month].contains(grouping)
    {
      if let department = filter.department {
        terms.append("department = ?")
        arguments.append(department)
      }
      if let from = filter.fromDate {
        terms.append("month >= ?")
        arguments.append(String(from.prefix(7)))
      }
      if let to = filter.toDate {
        terms.append("month <= ?")
        arguments.append(String(to.prefix(7)))
      }
      let key = ["none": "''", "department": "department", "year": "substr(month, 1, 4)",
                 "month": "month"][grouping.rawValue]!
      return finish(key, Self.rolledUp(function), "sales_monthly_department")
    }
    if additive.contains(function), let guid = filter.employeeGUID,
      [.none, .employee, .year, .month, .day].contains(grouping)
    {
      terms.append("e.guid = ?")
      arguments.append(guid)
      if let department = filter.department {
        terms.append("e.department = ?")
        arguments.append(department)
      }
      if let from = filter.fromDate {
        terms.append("d.day >= ?")
        arguments.append(from)
      }
      if let to = filter.toDate {
        terms.append("d.day <= ?")
        arguments.append(to)
      }
      let key = ["none": "''", "employee": "e.guid", "year": "substr(d.day, 1, 4)",
                 "month": "substr(d.day, 1, 7)", "day": "d.day"][grouping.rawValue]!
      return finish(key, Self.rolledUp(function), "sales_daily d JOIN employees e ON e.id = d.employee_id")
    }
    if let department = filter.department {
      terms.append("e.department = ?")
      arguments.append(department)
    }
    if let guid = filter.employeeGUID {
      terms.append("e.guid = ?")
      arguments.append(guid)
    }
    if let from = filter.fromDate {
      terms.append("s.date >= ?")
      arguments.append(from)
    }
    if let to = filter.toDate {
      terms.append("s.date <= ?")
      arguments.append(to)
    }
    let key = ["none": "''", "department": "e.department", "employee": "e.guid",
               "year": "substr(s.date, 1, 4)", "month": "substr(s.date, 1, 7)",
               "day": "s.date"][grouping.rawValue]!
    let value = RosterStore.aggregateExpression(function, column: "s.amount_cents", scale: 100)
    return finish(key, value, "sales s JOIN employees e ON e.id = s.employee_id")
  }

  /// COUNT, SUM or AVG from rollup rows with `count` and `total_cents`.
  static func rolledUp(_ function: AggregateFunction) -> String {
    switch function {
    case .count: "sum(count)"
    case .sum: "total(total_cents) / 100"
    default: "total(total_cents) / 100 / sum(count)"
    }
  }

  /// The last day of the month of a valid `YYYY-MM-DD` date.
  static func lastDay(ofMonth date: String) -> String {
    CivilDate(date)?.lastDayOfMonth.text ?? date
  }

}
