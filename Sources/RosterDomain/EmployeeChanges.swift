/// The editable fields of an employee that a write sets; nil leaves a field as it is.
///
/// Used by updates (the fields of an update mask), bulk upserts (the fields a row carries)
/// and batch updates (the `set_*` values).
public struct EmployeeChanges: Sendable, Hashable {
  public var name: String?
  public var department: String?
  public var email: String?
  public var phone: String?
  public var address: String?
  public var about: String?
  public var active: Bool?
  public var startDate: String?
  public var vacationDays: Int?

  /// Creates changes that set nothing.
  public init() {}

  /// Changes that set every editable field to the value in `employee`.
  public init(setting employee: Employee) {
    self.name = employee.name
    self.department = employee.department
    self.email = employee.email
    self.phone = employee.phone
    self.address = employee.address
    self.about = employee.about
    self.active = employee.active
    self.startDate = employee.startDate
    self.vacationDays = employee.vacationDays
  }

  /// True when no field is set.
  public var isEmpty: Bool { self.fields.isEmpty }

  /// The fields this sets, in declaration order.
  public var fields: [EmployeeField] {
    EmployeeField.editable.filter { self.sets($0) }
  }

  /// Whether this sets `field`.
  public func sets(_ field: EmployeeField) -> Bool {
    switch field {
    case .name: self.name != nil
    case .department: self.department != nil
    case .email: self.email != nil
    case .phone: self.phone != nil
    case .address: self.address != nil
    case .about: self.about != nil
    case .active: self.active != nil
    case .startDate: self.startDate != nil
    case .vacationDays: self.vacationDays != nil
    default: false
    }
  }

  /// `employee` with these changes applied.
  public func applied(to employee: Employee) -> Employee {
    var employee = employee
    if let name { employee.name = name }
    if let department { employee.department = department }
    if let email { employee.email = email }
    if let phone { employee.phone = phone }
    if let address { employee.address = address }
    if let about { employee.about = about }
    if let active { employee.active = active }
    if let startDate { employee.startDate = startDate }
    if let vacationDays { employee.vacationDays = vacationDays }
    return employee
  }

  /// The editable fields whose values differ between two employees.
  package static func differences(_ old: Employee, _ new: Employee) -> [EmployeeField] {
    EmployeeField.editable.filter { field in
      switch field {
      case .name: old.name != new.name
      case .department: old.department != new.department
      case .email: old.email != new.email
      case .phone: old.phone != new.phone
      case .address: old.address != new.address
      case .about: old.about != new.about
      case .active: old.active != new.active
      case .startDate: old.startDate != new.startDate
      case .vacationDays: old.vacationDays != new.vacationDays
      default: false
      }
    }
  }
}

extension EmployeeValidation {
  /// Checks every field `changes` sets against the rules of a stored employee.
  ///
  /// - Throws: `StoreError.invalidArgument` naming the first bad field.
  public static func validate(_ changes: EmployeeChanges) throws {
    if let name = changes.name, name.allSatisfy(\.isWhitespace) {
      throw StoreError(.invalidArgument, "name must not be empty")
    }
    if let department = changes.department, department.allSatisfy(\.isWhitespace) {
      throw StoreError(.invalidArgument, "department must not be empty")
    }
    let values = [
      changes.name, changes.department, changes.email, changes.phone, changes.address,
      changes.about,
    ]
    for ((field, limit), value) in zip(self.maximumLengths, values) {
      if let value { try self.checkLength(value, field: field, limit: limit) }
    }
    if let startDate = changes.startDate, !self.isValidDate(startDate) {
      throw StoreError(
        .invalidArgument,
        "start_date \(ClientText.quoted(startDate)) is not a YYYY-MM-DD date"
      )
    }
    if let vacationDays = changes.vacationDays, vacationDays < 0 {
      throw StoreError(.invalidArgument, "vacation_days must not be negative")
    }
  }
}
