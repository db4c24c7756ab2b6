internal import Foundation
internal import RosterDomain
internal import RosterProto
internal import SwiftProtobuf

/// The `Employee` fields the `.proto` marks `(roster.v1.personal) = true`, read once from the
/// descriptors the server is built with: no table in the code repeats them.
enum PersonalFields {
  /// Their API names (`phone`), as read masks and the change feed name them.
  static let names: Set<String> = Self.marked { $0.Roster_V1_personal }

  /// The fields marked `(roster.v1.self_editable) = true`: what an employee may change on
  /// their own record without the writer role.
  static let selfEditable: Set<String> = Self.marked { $0.Roster_V1_selfEditable }

  /// The names of the Employee fields whose options satisfy `mark`.
  private static func marked(_ mark: (Google_Protobuf_FieldOptions) -> Bool) -> Set<String> {
    let employee = MethodPolicies.serverDescriptors.file.filter { $0.package == "roster.v1" }
      .flatMap(\.messageType).first { $0.name == "Employee" }
    return Set(employee?.field.filter { mark($0.options) }.map(\.name) ?? [])
  }

  /// The store fields they are read from.
  static let fields: EmployeeFields = names.reduce(into: []) { fields, name in
    if let field = EmployeeField(rawValue: name) { fields.insert(field.reads) }
  }
}
