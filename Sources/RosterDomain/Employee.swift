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

extension EmployeeFields {
  /// The fields a write can change: what `EmployeeField.editable` reads.
  public static let editable: EmployeeFields = EmployeeField.editable.reduce(into: []) { $0.insert($1.reads) }
  /// What a write returns: everything but the thumbnail, which a write never changes.
  public static let allButThumbnail = EmployeeFields.all.subtracting(.thumbnail)
}
