internal import Foundation
internal import GRPCCore
internal import RosterDomain
internal import RosterProto
internal import RosterStore
internal import SwiftProtobuf

extension DirectoryRequests {
  /// The page of deletions DeleteEmployees makes when `limit` is 0.
  static let defaultDeleteLimit = 1_000

  /// The employee a CreateEmployee request describes; a missing guid gets a new one.
  static func newEmployee(_ message: Roster_V1_Employee) throws -> Employee {
    var employee = Employee()
    employee.guid =
      message.guid.isEmpty
      ? UUID().uuidString.lowercased()
      : try self.guid(message.guid, field: "employee.guid")
    employee.name = message.name
    employee.department = message.department
    employee.email = message.email
    employee.phone = message.phone
    employee.address = message.address
    employee.about = message.about
    employee.active = message.hasActive ? message.active : true
    employee.startDate = message.startDate
    employee.vacationDays = Int(message.vacationDays)
    return employee
  }

  /// The fields an UpdateEmployee request changes: the mask's paths, or, with no mask, the
  /// fields the message sets. A path the message leaves unset is cleared (AIP-134).
  ///
  /// - Throws: `INVALID_ARGUMENT` naming an unknown or immutable path, or an empty update.
  static func changes(
    _ message: Roster_V1_Employee,
    mask: Google_Protobuf_FieldMask?
  ) throws -> EmployeeChanges {
    guard let mask, !mask.paths.isEmpty else {
      let changes = self.presentFields(message)
      if changes.isEmpty {
        throw RPCError(
          code: .invalidArgument,
          message: "update_mask is empty and employee sets no editable field"
        )
      }
      return changes
    }
    var changes = EmployeeChanges()
    for path in mask.paths {
      guard let field = EmployeeField(rawValue: path), field.isEditable else {
        if EmployeeField(rawValue: path) != nil {
          throw RPCError(
            code: .invalidArgument,
            message: "update_mask: '\(path)' cannot be changed"
          )
        }
        throw RPCError(
          code: .invalidArgument,
          message: "update_mask: unknown path \(ClientText.quoted(path)); editable paths are "
            + EmployeeField.editable.map(\.rawValue).sorted().joined(separator: ", ")
        )
      }
      switch field {
      case .name: changes.name = message.name
      case .department: changes.department = message.department
      case .email: changes.email = message.email
      case .phone: changes.phone = message.phone
      case .address: changes.address = message.address
      case .about: changes.about = message.about
      case .active: changes.active = message.active
      case .startDate: changes.startDate = message.startDate
      default: changes.vacationDays = Int(message.vacationDays)
      }
    }
    return changes
  }

  /// The editable fields `message` sets (proto3 presence): what an upsert row merges.
  static func presentFields(_ message: Roster_V1_Employee) -> EmployeeChanges {
    var changes = EmployeeChanges()
    if message.hasName { changes.name = message.name }
    if message.hasDepartment { changes.department = message.department }
    if message.hasEmail { changes.email = message.email }
    if message.hasPhone { changes.phone = message.phone }
    if message.hasAddress { changes.address = message.address }
    if message.hasAbout { changes.about = message.about }
    if message.hasActive { changes.active = message.active }
    if message.hasStartDate { changes.startDate = message.startDate }
    if message.hasVacationDays { changes.vacationDays = Int(message.vacationDays) }
    return changes
  }

  /// The filter of a batch write, which must be set unless `all` says "every employee".
  static func batchFilter(
    department: String,
    active: Bool?,
    nameContains: String,
    all: Bool,
    verb: String
  ) throws -> EmployeeFilter {
    let filter = try self.filter(department: department, active: active, nameContains: nameContains)
    if filter.isEmpty && !all {
      throw RPCError(
        code: .invalidArgument,
        message: "all must be true to \(verb) every employee: no filter (department, active, "
          + "name_contains) is set"
      )
    }
    return filter
  }

  /// The DeleteEmployees limit: 0 means the default, and it is capped at the store's maximum.
  static func deleteLimit(_ value: Int32) throws -> Int {
    if value < 0 {
      throw RPCError(code: .invalidArgument, message: "limit must not be negative")
    }
    if value == 0 { return self.defaultDeleteLimit }
    return min(Int(value), StoreLimits.maximumDeleteLimit)
  }

  /// A watch's heartbeat interval: nil when the request sets none; from 1 s to an hour.
  static func heartbeatInterval(_ request: Roster_V1_WatchChangesRequest) throws -> Duration? {
    guard request.hasHeartbeatInterval else { return nil }
    let interval = request.heartbeatInterval
    let duration = Duration.seconds(interval.seconds) + .nanoseconds(Int64(interval.nanos))
    guard duration >= .seconds(1), duration <= .seconds(3600) else {
      throw RPCError(
        code: .invalidArgument,
        message: "heartbeat_interval: must be from 1s to 3600s, not \(interval.seconds)s"
      )
    }
    return duration
  }

  /// The sequence number an `after_token` names; an empty token means "from now".
  static func changeToken(_ text: String, now: Int64) throws -> Int64 {
    if text.isEmpty { return now }
    guard let sequence = Int64(text), sequence >= 0 else {
      throw RPCError(
        code: .invalidArgument,
        message: "after_token \(ClientText.quoted(text)) is not a token this server issued"
      )
    }
    return sequence
  }
}
