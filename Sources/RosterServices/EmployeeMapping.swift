internal import Foundation
internal import GRPCCore
internal import RosterDomain
internal import RosterProto
internal import RosterStore
internal import SwiftProtobuf

/// The Employee fields a read mask selected, as store fields plus the two proto fields
/// that share one column (`has_picture` and `picture_etag`).
struct EmployeeReadMask: Equatable {
  var fields: EmployeeFields
  var hasPicture: Bool
  var pictureEtag: Bool

  static let all = EmployeeReadMask(fields: .all, hasPicture: true, pictureEtag: true)
  /// What a write returns: everything but the thumbnail, which writes never change.
  static let written = EmployeeReadMask(
    fields: .allButThumbnail,
    hasPicture: true,
    pictureEtag: true
  )

  /// The mask of a request: every field when it has none.
  ///
  /// - Throws: `INVALID_ARGUMENT` naming an unknown path.
  init(_ mask: Google_Protobuf_FieldMask?) throws {
    guard let mask, !mask.paths.isEmpty else {
      self = .all
      return
    }
    var fields: EmployeeFields = []
    for path in mask.paths {
      guard let field = EmployeeField(rawValue: path) else {
        throw RPCError(
          code: .invalidArgument,
          message: "read_mask: unknown path '\(path)'; known paths are "
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
  }

  init(fields: EmployeeFields, hasPicture: Bool, pictureEtag: Bool) {
    self.fields = fields
    self.hasPicture = hasPicture
    self.pictureEtag = pictureEtag
  }
}

extension Roster_V1_Employee {
  /// The proto form of a store employee, with only the masked fields set.
  init(_ employee: Employee, mask: EmployeeReadMask) {
    self.init()
    let fields = mask.fields
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
