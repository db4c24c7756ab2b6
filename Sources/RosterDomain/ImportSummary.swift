/// What a bulk upsert or import did. `inserted + updated + rejected.count` is the number of
/// rows it was given.
public struct ImportSummary: Sendable, Hashable {
  /// New guids inserted.
  public var inserted: Int = 0
  /// Existing guids merged (rows whose values were already equal count here too).
  public var updated: Int = 0
  /// Rows refused, with their zero-based index in the input and the reason: the first
  /// `listedRejections` found, so that a reply, and the memory behind it, stay bounded
  /// whatever the input.
  public var rejected: [Rejected] = []
  /// Every row refused, listed or not.
  public var rejectedCount: Int = 0

  /// The most refusals a summary lists.
  public static let listedRejections = 1_000

  /// Rows written: inserted plus updated.
  public var imported: Int { self.inserted + self.updated }

  /// Creates an empty summary.
  public init() {}

  /// One refused row.
  public struct Rejected: Sendable, Hashable {
    /// Zero-based position in the input.
    public var index: Int
    /// Why, naming the field.
    public var reason: String

    /// Creates a refusal.
    public init(index: Int, reason: String) {
      self.index = index
      self.reason = reason
    }
  }

  /// Counts a refused row, and lists it while fewer than `listedRejections` are.
  public mutating func reject(index: Int, reason: String) {
    self.rejectedCount += 1
    if self.rejected.count < Self.listedRejections {
      self.rejected.append(Rejected(index: index, reason: reason))
    }
  }

  package mutating func merge(_ other: ImportSummary) {
    self.inserted += other.inserted
    self.updated += other.updated
    self.rejectedCount += other.rejectedCount
    self.rejected += other.rejected.prefix(Self.listedRejections - self.rejected.count)
  }
}

/// One row of a bulk upsert: a guid, and the fields the row sets.
public struct UpsertRow: Sendable, Hashable {
  /// The guid to merge on.
  public var guid: String
  /// The fields this row sets; the others keep their stored values (or defaults, when new).
  public var changes: EmployeeChanges

  /// Creates a row.
  public init(guid: String, changes: EmployeeChanges) {
    self.guid = guid
    self.changes = changes
  }

  /// The row with its guid in canonical form, once its values pass the stored employee's
  /// rules: what every backend checks before a row joins a chunk.
  ///
  /// - Throws: `invalidArgument` naming the guid or the first bad field.
  public func checked() throws -> UpsertRow {
    guard let guid = EmployeeValidation.canonicalGUID(self.guid) else {
      throw StoreError(.invalidArgument, "guid \(ClientText.quoted(self.guid)) is not a UUID")
    }
    try EmployeeValidation.validate(self.changes)
    return UpsertRow(guid: guid, changes: self.changes)
  }

  /// The employee a row for an unknown guid creates: active unless it says otherwise.
  ///
  /// - Throws: `invalidArgument` naming the first of name, department and start date it lacks.
  public func newEmployee() throws -> Employee {
    guard let name = self.changes.name, let department = self.changes.department,
      let startDate = self.changes.startDate
    else {
      let missing =
        self.changes.name == nil
        ? "name" : self.changes.department == nil ? "department" : "start_date"
      throw StoreError(.invalidArgument, "\(missing) is required for a new employee")
    }
    var employee = Employee()
    employee.guid = self.guid
    employee.name = name
    employee.department = department
    employee.startDate = startDate
    employee.active = true
    return self.changes.applied(to: employee)
  }
}
