/// One record of the sample's `seed.json` format.
///
/// Keys: `guid`, `active`, `picture`, `name`, `vacationDays`, `department`, `startDate`,
/// `email`, `phone`, `address` and `about`.
public import RosterDomain

public struct SeedRecord: Sendable, Hashable {
  /// The employee fields the record carries.
  public var employee: Employee
  /// File name of the full picture, relative to the pictures directory; nil for none.
  public var picture: String?

  /// Creates a record.
  public init(employee: Employee, picture: String? = nil) {
    self.employee = employee
    self.picture = picture
  }
}
