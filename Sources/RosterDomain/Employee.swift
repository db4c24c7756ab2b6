/// An employee as the store reads and writes it.
///
/// A value read with a partial field set leaves the other properties at their defaults.
public struct Employee: Sendable, Hashable {
  /// Internal row id; also the tie-breaker of every order.
  public var id: Int64 = 0
  /// Stable public identifier (a lower-case UUID).
  public var guid: String = ""
  /// Display name.
  public var name: String = ""
  /// Department name.
  public var department: String = ""
  /// Work e-mail address.
  public var email: String = ""
  /// Work phone number.
  public var phone: String = ""
  /// Postal address.
  public var address: String = ""
  /// Free text about the person.
  public var about: String = ""
  /// Whether the person currently works here.
  public var active: Bool = false
  /// First day of work, `YYYY-MM-DD`.
  public var startDate: String = ""
  /// Vacation days left.
  public var vacationDays: Int = 0
  /// The JPEG thumbnail, when there is one and it was asked for.
  public var thumbnail: [UInt8]? = nil
  /// Content hash of the full picture; nil when there is none.
  public var pictureEtag: String? = nil
  /// Number of sales recorded for this employee.
  public var salesCount: Int64 = 0
  /// Last change, in milliseconds since 1970.
  public var updateTimeMillis: Int64 = 0

  /// Creates an employee with every property at its default.
  public init() {}
}

/// A set of employee fields: what a read mask asks for.
///
/// Only the columns behind the chosen fields are read from SQLite.
public struct EmployeeFields: OptionSet, Sendable, Hashable {
  public let rawValue: UInt32
  public init(rawValue: UInt32) { self.rawValue = rawValue }

  public static let guid = EmployeeFields(rawValue: 1 << 0)
  public static let name = EmployeeFields(rawValue: 1 << 1)
  public static let department = EmployeeFields(rawValue: 1 << 2)
  public static let email = EmployeeFields(rawValue: 1 << 3)
  public static let phone = EmployeeFields(rawValue: 1 << 4)
  public static let address = EmployeeFields(rawValue: 1 << 5)
  public static let about = EmployeeFields(rawValue: 1 << 6)
  public static let active = EmployeeFields(rawValue: 1 << 7)
  public static let startDate = EmployeeFields(rawValue: 1 << 8)
  public static let vacationDays = EmployeeFields(rawValue: 1 << 9)
  public static let thumbnail = EmployeeFields(rawValue: 1 << 10)
  public static let pictureEtag = EmployeeFields(rawValue: 1 << 11)
  public static let salesCount = EmployeeFields(rawValue: 1 << 12)
  public static let updateTime = EmployeeFields(rawValue: 1 << 13)

  /// Every field, thumbnail included.
  public static let all = EmployeeFields(rawValue: (1 << 14) - 1)
}

/// The filters shared by List, Stream, Count and the batch writes.
public struct EmployeeFilter: Sendable, Hashable {
  /// Exact department, or nil for any.
  public var department: String?
  /// Active flag, or nil for both.
  public var active: Bool?
  /// Substring of the name, ignoring case and diacritics, or nil for any.
  public var nameContains: String?

  /// Creates a filter; nil or empty values filter nothing.
  public init(department: String? = nil, active: Bool? = nil, nameContains: String? = nil) {
    self.department = department.flatMap { $0.isEmpty ? nil : $0 }
    self.active = active
    self.nameContains = nameContains.flatMap { $0.isEmpty ? nil : $0 }
  }

  /// True when no filter is set.
  public var isEmpty: Bool {
    self.department == nil && self.active == nil && self.nameContains == nil
  }
}

/// The order of a listing. Ties are always broken by the row id, so every order is total.
public enum EmployeeOrder: String, Sendable, Hashable, CaseIterable {
  /// By folded name.
  case name
  /// By start date, oldest first.
  case startDate
  /// By department, then folded name.
  case department
}

/// A keyset position: the sort key values and row id of the last row of a page.
///
/// The next page starts strictly after it, so rows inserted between pages never shift it.
public struct EmployeeCursor: Sendable, Hashable {
  /// The values of the order's sort keys, in order.
  public var keys: [String]
  /// The row id of the last row.
  public var id: Int64

  /// Creates a cursor from sort key values and a row id.
  public init(keys: [String], id: Int64) {
    self.keys = keys
    self.id = id
  }
}

/// One page of a listing.
public struct EmployeePage: Sendable {
  /// The rows, in order.
  public var employees: [Employee]
  /// Where the next page starts; nil when this was the last page.
  public var next: EmployeeCursor?

  /// Creates a value from its parts.
  public init(employees: [Employee], next: EmployeeCursor?) {
    self.employees = employees
    self.next = next
  }
}

/// What `KeysetPages` fills: a page of rows, however they are held.
public protocol KeysetPage: Sendable {
  associatedtype Row
  /// An empty page with room for `limit` rows.
  init(reserving limit: Int)
  /// Rows in the page.
  var rowCount: Int { get }
  /// Adds a row.
  mutating func append(_ row: Row)
  /// Where the next page starts; nil when this was the last page.
  var next: EmployeeCursor? { get set }
}

extension EmployeePage: KeysetPage {
  public init(reserving limit: Int) {
    self.init(employees: [], next: nil)
    self.employees.reserveCapacity(limit)
  }

  public var rowCount: Int { self.employees.count }

  public mutating func append(_ employee: Employee) {
    self.employees.append(employee)
  }
}

/// Splits one keyset read of up to `limit × count + 1` rows into up to `count` consecutive
/// pages of `limit`, each with the cursor of its last row when a row follows it: what
/// `count` reads of `limit + 1` rows would give, from one statement.
///
/// ```swift
/// var pages = EmployeePages(limit: 50, count: 4)
/// while let row = try rows.next(), pages.takes() {
///   pages.append(decode(row), id: row.id) { sortKeys(row) }
/// }
/// return pages.result
/// ```
public struct KeysetPages<Page: KeysetPage>: Sendable {
  public let limit: Int
  public let count: Int
  private var full: [Page] = []
  private var current: Page
  private var last: EmployeeCursor?

  public init(limit: Int, count: Int) {
    precondition(limit > 0 && count > 0)
    self.limit = limit
    self.count = count
    self.current = Page(reserving: limit)
  }

  /// Called for each row before it is decoded: closes the current page when it is full (the
  /// row tells that more follow it), and says whether the row belongs to the pages; false
  /// once `count` pages are full, for the row past them, which ends the read.
  public mutating func takes() -> Bool {
    guard self.current.rowCount == self.limit else { return true }
    self.current.next = self.last
    self.full.append(self.current)
    self.current = Page(reserving: self.limit)
    return self.full.count < self.count
  }

  /// The next row, with its row id and its sort key values: `keys` is called only for the row
  /// that ends a page, the one a cursor names.
  public mutating func append(_ row: Page.Row, id: Int64, keys: () throws -> [String]) rethrows {
    self.current.append(row)
    if self.current.rowCount == self.limit {
      self.last = EmployeeCursor(keys: try keys(), id: id)
    }
  }

  /// The page being filled, for a page that takes its row in parts (`WrittenEmployeePage`:
  /// the row's bytes written into it, then the row counted by `append`).
  public mutating func withCurrentPage<Result>(
    _ body: (inout Page) throws -> Result
  ) rethrows -> Result {
    try body(&self.current)
  }

  /// The pages read: at least one (empty when nothing matched); the last one's `next` is nil
  /// when the read found no row after it.
  public var result: [Page] {
    if self.current.rowCount == 0 && !self.full.isEmpty { return self.full }
    return self.full + [self.current]
  }
}

/// `KeysetPages` of `Employee` values.
public typealias EmployeePages = KeysetPages<EmployeePage>

extension EmployeeFields {
  /// The fields a write can change: what `EmployeeField.editable` reads.
  public static let editable: EmployeeFields = EmployeeField.editable.reduce(into: []) {
    $0.insert($1.reads)
  }
  /// What a write returns: everything but the thumbnail, which a write never changes.
  public static let allButThumbnail = EmployeeFields.all.subtracting(.thumbnail)
}
