internal import Foundation
internal import GRPCCore
internal import RosterDomain
internal import RosterStore

/// Who makes the current call, as far as what they may see: their role and, for a caller
/// signed in by the identity provider, their e-mail, which makes one employee record their own.
///
/// Set by `AuthInterceptor` for the whole call; nil when the server takes calls without
/// tokens, where every caller sees every field (the operator's choice, on loopback or with
/// `--insecure`).
public struct Caller: Sendable, Equatable {
  /// The caller's role; nil for a signed-in caller whose token gives none.
  public var role: Role?
  /// The caller's e-mail address, lower-cased (as `TokenVerifier.Claims` gives it), from a
  /// sign-in token that vouches for it.
  public var email: String?
  /// Whether the call was let in only for the caller's own record: its method is
  /// `self_service` and the caller's role is below the one it needs.
  public var ownRecordOnly: Bool
  /// Whether the caller may name whom they act for (`x-roster-author`): a service's static
  /// token, or a signed-in admin.
  public var mayActOnBehalf: Bool

  @TaskLocal public static var current: Caller?

  public init(
    role: Role?,
    email: String? = nil,
    ownRecordOnly: Bool = false,
    mayActOnBehalf: Bool = false
  ) {
    self.role = role
    self.email = email
    self.ownRecordOnly = ownRecordOnly
    self.mayActOnBehalf = mayActOnBehalf
  }

  /// What the current caller may see of personal fields: nil when all of them (no
  /// authentication, or the `hr` or `admin` role), else the limit the read masks apply.
  static var personalLimit: PersonalLimit? {
    guard let caller = Self.current, caller.role?.seesPersonalFields != true else { return nil }
    return PersonalLimit(ownEmail: caller.email)
  }

  /// Whether the current caller may not see vacation days, a personal field: aggregates over
  /// them are theirs to see only with the role that sees the field.
  static var vacationDaysHidden: Bool {
    Self.personalLimit != nil && PersonalFields.names.contains(EmployeeField.vacationDays.rawValue)
  }

  /// For a call let in only for the caller's own record: reads the e-mail of the employee
  /// `guid` from `store` and checks that it is that record; nothing for any other call.
  ///
  /// - Throws: `PERMISSION_DENIED` naming `field` when it is not; the store's errors.
  static func requireOwnRecord(
    guid: String,
    field: String,
    store: any DirectoryStore
  ) async throws {
    guard let caller = Self.current, caller.ownRecordOnly else { return }
    let employee = try await store.employee(guid: guid, fields: .email)
    guard PersonalLimit(ownEmail: caller.email).owns(employee) else {
      throw RPCError(
        code: .permissionDenied,
        message: "\(field): without the writer role, only your own record may be changed"
      )
    }
  }
}

/// Personal fields only on the caller's own record: the one whose e-mail is `ownEmail`, compared
/// as `LookupEmployee` compares (ASCII letters without case); none when nil.
struct PersonalLimit: Equatable, Sendable {
  var ownEmail: String?

  /// Whether `employee` is the caller's own record.
  func owns(_ employee: some EmployeeWireSource) -> Bool {
    guard let own = self.ownEmail else { return false }
    return employee.withText(.email) { bytes in
      bytes.count == own.utf8.count
        && zip(bytes, own.utf8).allSatisfy { Self.lowered($0) == $1 }
    }
  }

  private static func lowered(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
  }
}
