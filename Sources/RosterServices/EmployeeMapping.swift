internal import Foundation
internal import GRPCCore
internal import RosterDomain
internal import RosterProto
internal import RosterStore
internal import SwiftProtobuf

/// The Employee fields a read mask selected, as store fields plus the two proto fields
/// that share one column (`has_picture` and `picture_etag`), and what the caller may see of
/// personal fields (`limit`): each row is written with `fields(for:)`.
struct EmployeeReadMask: Equatable {
  var fields: EmployeeFields
  var hasPicture: Bool
  var pictureEtag: Bool
  /// Set when the caller sees personal fields only on their own record (`Caller`).
  var limit: PersonalLimit?
  /// The first personal field the request's mask named, for a caller with a `limit`: allowed
  /// only on the caller's own record (`permit(_:)`).
  private var namedPersonal: String?

  /// Every field, as far as the current caller may see them.
  static var all: EmployeeReadMask {
    EmployeeReadMask(fields: .all, hasPicture: true, pictureEtag: true)
  }
  /// What a write returns: everything but the thumbnail, which writes never change; personal
  /// fields as far as the current caller may see them.
  static var written: EmployeeReadMask {
    EmployeeReadMask(fields: .allButThumbnail, hasPicture: true, pictureEtag: true)
  }

  /// The mask of a request: every field when it has none.
  ///
  /// - Parameter ownRecord: whether the request reads records one by one, so that a mask
  ///   naming a personal field may be allowed on the caller's own (checked by `permit(_:)`
  ///   once they are read); otherwise such a mask is refused here.
  /// - Throws: `INVALID_ARGUMENT` naming an unknown path; `PERMISSION_DENIED` naming a
  ///   personal field the caller may not see.
  init(_ mask: Google_Protobuf_FieldMask?, ownRecord: Bool = false) throws {
    guard let mask, !mask.paths.isEmpty else {
      self = .all
      return
    }
    var fields: EmployeeFields = []
    for path in mask.paths {
      guard let field = EmployeeField(rawValue: path) else {
        throw RPCError(
          code: .invalidArgument,
          message: "read_mask: unknown path \(ClientText.quoted(path)); known paths are "
            + EmployeeField.allCases.map(\.rawValue).sorted().joined(separator: ", ")
        )
      }
      fields.insert(field.reads)
    }
    self.init(
      fields: fields,
      hasPicture: mask.paths.contains(EmployeeField.hasPicture.rawValue),
      pictureEtag: mask.paths.contains(EmployeeField.pictureEtag.rawValue)
    )
    if let limit = self.limit,
      let named = mask.paths.first(where: { PersonalFields.names.contains($0) })
    {
      guard ownRecord, limit.ownEmail != nil else { throw Self.denied(named) }
      self.namedPersonal = named
    }
  }

  init(fields: EmployeeFields, hasPicture: Bool, pictureEtag: Bool) {
    self.fields = fields
    self.hasPicture = hasPicture
    self.pictureEtag = pictureEtag
    self.limit = Caller.personalLimit
  }

  /// The fields the store reads: the mask's, and the e-mail when it tells whether a row is the
  /// caller's own, which decides whether its personal fields are written.
  var readFields: EmployeeFields {
    guard let limit = self.limit, limit.ownEmail != nil,
      !self.fields.isDisjoint(with: PersonalFields.fields)
    else { return self.fields }
    return self.fields.union(.email)
  }

  /// The fields written for `row`: the mask's, without personal fields on a record that is not
  /// the caller's when the caller has a `limit`.
  func fields(for row: some EmployeeWireSource) -> EmployeeFields {
    guard let limit = self.limit, !self.fields.isDisjoint(with: PersonalFields.fields),
      !limit.owns(row)
    else { return self.fields }
    return self.fields.subtracting(PersonalFields.fields)
  }

  /// Checks records read one by one against a mask that named a personal field: each must be
  /// the caller's own.
  ///
  /// - Throws: `PERMISSION_DENIED` naming the field.
  func permit(_ employees: some Sequence<Employee>) throws {
    guard let named = self.namedPersonal, let limit = self.limit else { return }
    for employee in employees where !limit.owns(employee) { throw Self.denied(named) }
  }

  private static func denied(_ path: String) -> RPCError {
    RPCError(
      code: .permissionDenied,
      message: "read_mask: '\(path)' is a personal field, which needs the hr or admin role "
        + "(or the caller's own record, signed in)"
    )
  }
}

extension Roster_V1_Employee {
  /// The proto form of a store employee, with only the masked fields set.
  init(_ employee: Employee, mask: EmployeeReadMask) {
    self.init()
    let fields = mask.fields(for: employee)
    if fields.contains(.guid) { self.guid = employee.guid }
    if fields.contains(.name) { self.name = employee.name }
    if fields.contains(.department) { self.department = employee.department }
    if fields.contains(.email) { self.email = employee.email }
    if fields.contains(.phone) { self.phone = employee.phone }
    if fields.contains(.address) { self.address = employee.address }
    if fields.contains(.about) { self.about = employee.about }
    if fields.contains(.active) { self.active = employee.active }
    if fields.contains(.startDate) { self.startDate = employee.startDate }
    if fields.contains(.vacationDays) { self.vacationDays = Int32(clamping: employee.vacationDays) }
    if fields.contains(.thumbnail), let thumbnail = employee.thumbnail {
      self.thumbnail = Data(thumbnail)
    }
    if mask.hasPicture { self.hasPicture_p = employee.pictureEtag != nil }
    if mask.pictureEtag { self.pictureEtag = employee.pictureEtag ?? "" }
    if fields.contains(.salesCount) { self.salesCount = employee.salesCount }
    if fields.contains(.updateTime) {
      self.updateTime = Google_Protobuf_Timestamp(millis: employee.updateTimeMillis)
    }
  }
}

extension Roster_V1_ChangeEvent {
  /// The proto form of a change-log row; its token is the row's sequence number.
  init(_ change: Change) {
    self.init()
    self.token = String(change.sequence)
    self.entity =
      switch change.entity {
      case .employee: .employee
      case .picture: .picture
      case .sale: .sale
      }
    self.guid = change.guid
    self.kind =
      switch change.kind {
      case .inserted: .inserted
      case .updated: .updated
      case .deleted: .deleted
      }
    self.fields = change.fields
    self.author = change.author
    self.onBehalfOf = change.onBehalfOf
    self.updateTime = Google_Protobuf_Timestamp(millis: change.timeMillis)
  }
}

extension Google_Protobuf_Timestamp {
  /// A timestamp from the store's milliseconds since 1970.
  init(millis: Int64) {
    self.init(seconds: millis / 1000, nanos: Int32(millis % 1000) * 1_000_000)
  }
}

extension Roster_V1_Rejection {
  /// A bulk write's refused row, as a reply lists it.
  init(_ rejection: ImportSummary.Rejected) {
    self.init()
    self.index = Int64(rejection.index)
    self.reason = rejection.reason
  }
}
