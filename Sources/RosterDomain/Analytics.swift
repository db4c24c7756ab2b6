internal import Foundation
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

  /// Creates a value from its parts.
  public init(department: String, headcount: Int64, active: Int64, vacationDaysTotal: Int64) {
    self.department = department
    self.headcount = headcount
    self.active = active
    self.vacationDaysTotal = vacationDaysTotal
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

  /// Creates a value from its parts.
  public init(key: String, value: Double) {
    self.key = key
    self.value = value
  }
}

/// Which groups of an aggregate to answer: those after a key, at most `limit` of them.
public struct AggregatePageRequest: Sendable, Hashable {
  /// The default number of groups per page.
  public static let defaultLimit = 1000
  /// The most groups one page may hold: with 100-character keys, about 2 MB.
  public static let maximumLimit = 5000

  /// Only groups whose key sorts after this one; nil for the first page.
  public var after: String?
  /// The most groups to answer, 1 to `maximumLimit`.
  public var limit: Int

  /// Creates a page request; `limit` is clamped to 1...`maximumLimit`.
  public init(after: String? = nil, limit: Int = Self.defaultLimit) {
    self.after = after
    self.limit = min(max(1, limit), Self.maximumLimit)
  }
}

/// One page of an aggregate's groups.
public struct AggregatePage: Sendable, Hashable {
  /// The groups, sorted by key.
  public var groups: [AggregateValue]
  /// The key to continue after; nil on the last page.
  public var next: String?

  /// Creates a page.
  public init(groups: [AggregateValue], next: String?) {
    self.groups = groups
    self.next = next
  }
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
  /// The amount in cents (integer units of the currency's smallest part).
  public var amountCents: Int64
  public var date: String

  public init(employeeGUID: String, amountCents: Int64, date: String) {
    self.employeeGUID = employeeGUID
    self.amountCents = amountCents
    self.date = date
  }
}

/// A page of stored sales in the order they were stored, for `roster copy`.
public struct SalesPage: Sendable {
  /// The sales, in order.
  public var rows: [SaleRow]
  /// Where the next page starts; nil when this was the last page.
  public var next: Int64?

  /// Creates a value from its parts.
  public init(rows: [SaleRow], next: Int64?) {
    self.rows = rows
    self.next = next
  }
}

/// Sales totals by calendar period.
public struct SalesCalendar: Sendable, Hashable {
  public struct Period: Sendable, Hashable {
    /// The year, month or day number.
    public var number: Int
    public var count: Int64
    /// The sum of the period's amounts, in cents.
    public var amountCents: Int64

    /// Creates a value from its parts.
    public init(number: Int, count: Int64, amountCents: Int64) {
      self.number = number
      self.count = count
      self.amountCents = amountCents
    }
  }
  public struct Year: Sendable, Hashable {
    public var year: Period
    public var months: [Period]

    /// Creates a value from its parts.
    public init(year: Period, months: [Period]) {
      self.year = year
      self.months = months
    }
  }
  public var years: [Year] = []
  /// The requested month's days, when a year and month were given.
  public var days: [Period] = []

  /// Creates an empty calendar.
  public init() {}
}

/// Whose sales a calendar covers.
public enum SalesScope: Sendable, Hashable {
  case everyone
  case department(String)
  case employee(guid: String)
}

// MARK: Rules every backend shares

extension AggregatePage {
  /// A page from up to `page.limit + 1` groups in key order: the extra group, if any, becomes
  /// the next page's key. With no grouping there is always one answer, even over no rows.
  public init(
    cutting groups: [AggregateValue],
    grouping: AggregateGrouping,
    page: AggregatePageRequest
  ) {
    if grouping == .none {
      if page.after != nil {
        self.init(groups: [], next: nil)
      } else {
        self.init(groups: groups.isEmpty ? [AggregateValue(key: "", value: 0)] : groups, next: nil)
      }
      return
    }
    guard groups.count > page.limit else {
      self.init(groups: groups, next: nil)
      return
    }
    let kept = Array(groups.prefix(page.limit))
    self.init(groups: kept, next: kept.last?.key)
  }
}

extension SalesFilter {
  /// Checks the date range: both ends `YYYY-MM-DD`, the start not after the end.
  ///
  /// - Throws: `invalidArgument` naming `from` or `to`.
  public func checkRange() throws {
    for (field, date) in [("from", self.fromDate), ("to", self.toDate)] {
      if let date, !EmployeeValidation.isValidDate(date) {
        throw StoreError(
          .invalidArgument,
          "\(field) \(ClientText.quoted(date)) is not a YYYY-MM-DD date"
        )
      }
    }
    if let from = self.fromDate, let to = self.toDate, from > to {
      throw StoreError(.invalidArgument, "the range starts on \(from), after its end on \(to)")
    }
  }

  /// The dates of a page of groups keyed by date (year, month or day) read from raw sales:
  /// the range narrowed to the groups after `after` and through `last`, as one bound on each
  /// side, which an index on the date serves. Given two bounds on one side (`date <= ?`
  /// twice), SQLite's index search may take the wider and test the other on every row (a
  /// page through 1999 of a range to 2999 read every sale after 1999 too), and a bound on the
  /// group's key (`substr(date, 1, 4) > ?`) serves no index on either backend.
  public func pageDates(after: String?, through last: String?) -> (from: String?, to: String?) {
    // "~" sorts after every character of a date: `key~` follows every date starting with key.
    (
      [self.fromDate, after.map { $0 + "~" }].compactMap { $0 }.max(),
      [self.toDate, last.map { $0 + "~" }].compactMap { $0 }.min()
    )
  }

  /// Whether the range covers whole months (or is open), so monthly rollups can answer it.
  public var coversWholeMonths: Bool {
    (self.fromDate.map { $0.hasSuffix("-01") } ?? true)
      && (self.toDate.map { $0 == (CivilDate($0)?.lastDayOfMonth.text ?? $0) } ?? true)
  }
}

extension SalesCalendar {
  /// Checks a calendar request: a month needs a year, months are 1 to 12, years 1900 to 9999.
  ///
  /// - Throws: `invalidArgument` naming the field.
  public static func check(year: Int?, month: Int?) throws {
    if month != nil && year == nil {
      throw StoreError(.invalidArgument, "month needs a year")
    }
    if let month, !(1 ... 12).contains(month) {
      throw StoreError(.invalidArgument, "month \(month) is not between 1 and 12")
    }
    if let year, !(1900 ... 9999).contains(year) {
      throw StoreError(.invalidArgument, "year \(year) is not between 1900 and 9999")
    }
  }

  /// Adds one month's totals (`month` as `YYYY-MM`, in order) under its year.
  public mutating func add(month: String, count: Int64, amountCents: Int64) {
    let year = Int(month.prefix(4)) ?? 0
    let period = Period(number: Int(month.suffix(2)) ?? 0, count: count, amountCents: amountCents)
    if self.years.last?.year.number != year {
      self.years.append(Year(year: Period(number: year, count: 0, amountCents: 0), months: []))
    }
    self.years[self.years.count - 1].months.append(period)
    self.years[self.years.count - 1].year.count += count
    self.years[self.years.count - 1].year.amountCents += amountCents
  }
}
