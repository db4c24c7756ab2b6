import Foundation
import PropertyBased
import RosterDomain
import RosterProto
import SwiftProtobuf
import Testing

@testable import RosterServices

/// The hand-written employee codecs against swift-protobuf, as property checks
/// (swift-property-based): for random employees, masks and page tokens, `EmployeeWire` writes
/// the bytes SwiftProtobuf writes for the same message, and `EmployeeJSON` writes strict JSON of
/// the value SwiftProtobuf writes, which SwiftProtobuf's reader reads as that message. A disagreement is reported with its seed and
/// shrunk to the fewest, shortest employees and the smallest mask that still disagree.
@Suite("Employee codecs against swift-protobuf, property checks", .timeLimit(.minutes(10)))
struct EmployeeCodecPropertyTests {
  /// Plain letters first (what text shrinks to), then what each format escapes or encodes
  /// specially: multibyte UTF-8, JSON's quote, backslash and control characters, a character
  /// outside the Basic Multilingual Plane, and JavaScript's line separator.
  static let alphabet = Array("abcdefghij Ñúé—日本\"\\\n\t\u{01}\u{1F}\u{7F}😀/\u{2028}")

  static func text(_ most: Int) -> Generator<String, some SendableSequenceType> {
    Gen.int(in: 0 ... Self.alphabet.count - 1).map { Self.alphabet[$0] }.string(of: 0 ... most)
  }

  /// An employee's identity and text.
  static var identity:
    Generator<
      (Int64, String, String, String, String, String, String, String), some SendableSequenceType
    >
  {
    zip(
      Gen.int64(in: 0 ... 999_999),
      Self.text(40),
      Self.text(30),
      Self.text(12),
      Self.text(30),
      Self.text(15),
      Self.text(80),
      Self.text(400)
    )
  }

  /// The rest of an employee. Update times start at 1970: a `Timestamp` before it has no JSON
  /// form to compare with.
  static var details:
    Generator<(Bool, String, Int, [UInt8]?, String?, Int64, Int64), some SendableSequenceType>
  {
    zip(
      Gen.bool,
      Self.text(11),
      Gen.int(in: -99 ... 99),
      Gen.uint8(in: 0 ... 255).array(of: 0 ... 300).optional,
      Self.text(64).optional,
      Gen.int64(in: -999_999 ... 999_999),
      Gen.int64(in: 0 ... 4_000_000_000_000)
    )
  }

  static var employee: Generator<Employee, some SendableSequenceType> {
    zip(Self.identity, Self.details).map { identity, details -> Employee in
      var employee = Employee()
      (
        employee.id, employee.guid, employee.name, employee.department, employee.email,
        employee.phone, employee.address, employee.about
      ) = identity
      (
        employee.active, employee.startDate, employee.vacationDays, employee.thumbnail,
        employee.pictureEtag, employee.salesCount, employee.updateTimeMillis
      ) = details
      return employee
    }
  }

  /// A read mask: any fields, with or without the picture's flag and etag.
  static var mask: Generator<EmployeeReadMask, some SendableSequenceType> {
    zip(Gen.uint32(in: 0 ... EmployeeFields.all.rawValue), Gen.bool, Gen.bool)
      .map { fields, hasPicture, etag in
        EmployeeReadMask(
          fields: EmployeeFields(rawValue: fields & EmployeeFields.all.rawValue),
          hasPicture: hasPicture,
          pictureEtag: etag
        )
      }
  }

  static var employees: Generator<[Employee], some SendableSequenceType> {
    Self.employee.array(of: 0 ... 6)
  }

  /// The replies made of one page: a `ListEmployees` reply, a `StreamEmployees` message and a
  /// `GetEmployee` reply of each employee.
  static func replies(
    _ employees: [Employee],
    _ mask: EmployeeReadMask,
    _ token: String
  ) -> (
    EmployeePageReply<Roster_V1_ListEmployeesResponse>, EmployeePageReply<Roster_V1_EmployeePage>,
    [EmployeeReply]
  ) {
    (
      EmployeePageReply(employees: employees, mask: mask, nextPageToken: token),
      EmployeePageReply(employees: employees, mask: mask, nextPageToken: token),
      employees.map { EmployeeReply(employee: $0, mask: mask) }
    )
  }

  /// Runs `check` on the replies of 300 random pages, masks and tokens, recording what it throws.
  static func forRandomPages(
    _ check:
      @escaping (
        EmployeePageReply<Roster_V1_ListEmployeesResponse>,
        EmployeePageReply<Roster_V1_EmployeePage>,
        [EmployeeReply]
      ) throws -> Void
  ) async {
    await propertyCheck(count: 300, input: Self.employees, Self.mask, Self.text(60)) {
      employees,
      mask,
      token in
      recordingErrors {
        let (page, streamed, ones) = Self.replies(employees, mask, token)
        try check(page, streamed, ones)
      }
    }
  }

  @Test("EmployeeWire writes SwiftProtobuf's bytes for every page, stream page and employee")
  func sameBytes() async throws {
    await Self.forRandomPages { page, streamed, ones in
      let pageBytes: [UInt8] = try page.message.serializedBytes()
      #expect(page.binary() == pageBytes)
      let streamedBytes: [UInt8] = try streamed.message.serializedBytes()
      #expect(streamed.binary() == streamedBytes)
      for one in ones {
        let oneBytes: [UInt8] = try one.message.serializedBytes()
        #expect(one.binary() == oneBytes)
      }
    }
  }

  /// A JSON text as strict JSON reads it (Foundation's parser, which refuses what RFC 8259
  /// refuses, such as an unescaped control character), written back with sorted keys: the same
  /// for two texts of the same value, however each writer orders and escapes.
  static func value(_ json: [UInt8]) throws -> Data {
    let object = try JSONSerialization.jsonObject(with: Data(json))
    return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
  }

  /// Checks one reply's JSON: strict JSON of SwiftProtobuf's value, read back as its message.
  static func checkJSON<Message: SwiftProtobuf.Message & Equatable>(
    _ json: [UInt8],
    _ message: Message
  ) throws {
    let written = try Self.value(json)
    let expected = try Self.value(try message.jsonUTF8Bytes())
    #expect(written == expected)
    let decoded = try Message(jsonUTF8Bytes: json)
    #expect(decoded == message)
  }

  @Test("EmployeeJSON writes strict JSON of the value SwiftProtobuf writes, which reads it back")
  func sameValuesAsJSON() async throws {
    await Self.forRandomPages { page, streamed, ones in
      try Self.checkJSON(page.json(), page.message)
      try Self.checkJSON(streamed.json(), streamed.message)
      for one in ones { try Self.checkJSON(one.json(), one.message) }
    }
  }
}

/// Runs a property check's body with what it throws recorded as an issue: swift-property-based
/// counts recorded issues only, and drops an error its body throws (`try?`), which would pass a
/// failing check.
func recordingErrors(_ body: () throws -> Void) {
  do {
    try body()
  } catch {
    Issue.record(error)
  }
}
