/// The rules every stored employee obeys, shared by import and the write RPCs.
///
/// Each check throws `StoreError.invalidArgument` with a message that names the field.
public enum EmployeeValidation {
  /// The longest accepted name, in characters; also the longest `name_contains` filter.
  public static let maximumNameLength = 200
  /// The longest accepted department, in characters; also the longest department filter.
  public static let maximumDepartmentLength = 100

  /// The longest accepted e-mail address, in characters (RFC 5321's path limit); also the
  /// longest address `LookupEmployee` takes.
  public static let maximumEmailLength = 254

  /// The longest accepted value of each text field, in characters.
  public static let maximumLengths: [(field: String, limit: Int)] = [
    ("name", maximumNameLength), ("department", maximumDepartmentLength),
    ("email", maximumEmailLength),
    ("phone", 50), ("address", 500), ("about", 4000),
  ]

  /// Throws `invalidArgument` naming `field` when `value` is longer than `limit` characters.
  public static func checkLength(_ value: String, field: String, limit: Int) throws {
    // No more characters than bytes: characters, which take a walk over grapheme clusters,
    // are counted only for a value with more bytes than the limit, and only as far as the
    // limit (not the megabytes a request may bring).
    if value.utf8.count > limit,
      let end = value.index(value.startIndex, offsetBy: limit, limitedBy: value.endIndex),
      end != value.endIndex
    {
      throw StoreError(.invalidArgument, "\(field) is longer than \(limit) characters")
    }
  }

  /// The canonical form of `text`, a guid the caller must send.
  ///
  /// - Throws: `invalidArgument` naming the field when `text` is empty or not a UUID.
  public static func requireGUID(_ text: String, field: String = "guid") throws -> String {
    if text.isEmpty { throw StoreError(.invalidArgument, "\(field) is required") }
    guard let guid = self.canonicalGUID(text) else {
      throw StoreError(.invalidArgument, "\(field) \(ClientText.quoted(text)) is not a UUID")
    }
    return guid
  }

  /// The canonical (lower-case) form of a guid, or nil if `text` is not a UUID.
  public static func canonicalGUID(_ text: String) -> String? {
    guard text.utf8.count == 36 else { return nil }
    var upperCase = false
    var index = 0
    for byte in text.utf8 {
      defer { index += 1 }
      if index == 8 || index == 13 || index == 18 || index == 23 {
        guard byte == UInt8(ascii: "-") else { return nil }
        continue
      }
      switch byte {
      case UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "a") ... UInt8(ascii: "f"):
        continue
      case UInt8(ascii: "A") ... UInt8(ascii: "F"):
        upperCase = true
      default:
        return nil
      }
    }
    // Most guids arrive in canonical form already: those are returned as they came.
    guard upperCase else { return text }
    return String(
      decoding: text.utf8.map { UInt8(ascii: "A") ... UInt8(ascii: "F") ~= $0 ? $0 + 32 : $0 },
      as: UTF8.self
    )
  }

  /// Whether `text` is a real calendar date written `YYYY-MM-DD`.
  public static func isValidDate(_ text: String) -> Bool {
    CivilDate(text) != nil
  }

  /// Checks a complete employee and returns it with its guid in canonical form.
  public static func validated(_ employee: Employee) throws -> Employee {
    var employee = employee
    guard let guid = self.canonicalGUID(employee.guid) else {
      throw StoreError(.invalidArgument, "guid \(ClientText.quoted(employee.guid)) is not a UUID")
    }
    employee.guid = guid
    try self.validate(EmployeeChanges(setting: employee))
    return employee
  }
}
