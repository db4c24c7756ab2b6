/// One field of an employee, named as the API and the change log name it (`start_date`).
public enum EmployeeField: String, Sendable, Hashable, CaseIterable {
  case guid, name, department, email, phone, address, about, active
  case startDate = "start_date"
  case vacationDays = "vacation_days"
  case thumbnail
  case hasPicture = "has_picture"
  case pictureEtag = "picture_etag"
  case salesCount = "sales_count"
  case updateTime = "update_time"

  /// The fields a write may set, in declaration order.
  public static let editable: [EmployeeField] = [
    .name, .department, .email, .phone, .address, .about, .active, .startDate, .vacationDays,
  ]

  /// The fields a batch update may set on many employees at once.
  public static let batchEditable: Set<EmployeeField> = [.department, .active, .vacationDays]

  /// Whether a write may set this field; the others are kept by the store.
  public var isEditable: Bool { Self.editable.contains(self) }

  /// What a read of this field reads.
  public var reads: EmployeeFields {
    switch self {
    case .guid: .guid
    case .name: .name
    case .department: .department
    case .email: .email
    case .phone: .phone
    case .address: .address
    case .about: .about
    case .active: .active
    case .startDate: .startDate
    case .vacationDays: .vacationDays
    case .thumbnail: .thumbnail
    case .hasPicture, .pictureEtag: .pictureEtag
    case .salesCount: .salesCount
    case .updateTime: .updateTime
    }
  }
}
