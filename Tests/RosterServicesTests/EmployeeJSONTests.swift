import Foundation
import RosterDomain
import RosterProto
import RosterStore
import SwiftProtobuf
import Testing

@testable import RosterServices

/// `EmployeeJSON` writes the Connect protocol's JSON replies straight from the store's
/// employees: SwiftProtobuf must read each as the message it would have written, for every
/// mask, with every kind of character in the text (random pages: `EmployeeCodecPropertyTests`),
/// also when written row by row as the store reads them.
@Suite("Employees and pages written straight to JSON", .timeLimit(.minutes(10)))
struct EmployeeJSONTests {
  /// An employee from `EmployeeWireTests`' generator, with JSON's special characters, control
  /// characters and characters outside the Basic Multilingual Plane in its text, and a time
  /// after 1970 (a `Timestamp` before it has no valid message form to compare with).
  static func employee(_ random: inout SplitMix64) -> Employee {
    var employee = EmployeeWireTests.employee(&random)
    let specials = ["\"", "\\", "\n", "\t", "\u{01}", "\u{1F}", "\u{7F}", "😀", "/", "\u{2028}"]
    for _ in 0 ..< Int(random.next() % 4) {
      employee.name += specials[Int(random.next() % UInt64(specials.count))]
      employee.about += specials[Int(random.next() % UInt64(specials.count))]
    }
    employee.updateTimeMillis = abs(employee.updateTimeMillis)
    return employee
  }

  @Test("eight bytes at a time: a word needs an escape exactly when one of its bytes does")
  func wordsNeedingEscapes() {
    func needs(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x22 || byte == 0x5C }
    // Every byte value in every place, among bytes that need none (ASCII and UTF-8's high
    // bytes, which sit next to the thresholds).
    for filler: UInt8 in [0x61, 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x80, 0xFF] {
      for place in 0 ..< 8 {
        for byte in UInt8.min ... UInt8.max {
          var bytes = [UInt8](repeating: filler, count: 8)
          bytes[place] = byte
          let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
          #expect(EmployeeJSON.needsEscape(word) == needs(byte), "\(bytes)")
        }
      }
    }
    // And random words, some with several bytes that need one.
    var random = SplitMix64(seed: 7)
    for _ in 0 ..< 100_000 {
      let word = random.next() & random.next() | 0x4040_4040_4040_4040 & random.next()
      let bytes = withUnsafeBytes(of: word) { Array($0) }
      #expect(EmployeeJSON.needsEscape(word) == bytes.contains(where: needs), "\(bytes)")
    }
  }

  @Test("pages written row by row as the store reads them: the same text as from employees")
  func writtenRows() throws {
    var random = SplitMix64(seed: 53)
    for round in 0 ..< 300 {
      let employees = (0 ..< Int(random.next() % 8)).map { _ in Self.employee(&random) }
      let mask = round == 0 ? EmployeeReadMask.all : EmployeeWireTests.mask(&random)
      let token = random.next() % 3 == 0 ? "" : "next\(round)"
      let fromEmployees = EmployeePageReply<Roster_V1_ListEmployeesResponse>(
        employees: employees,
        mask: mask,
        nextPageToken: token
      )
      for page in EmployeeWireTests.writtenPages(employees, EmployeeJSON.Rows(mask: mask)) {
        let reply = EmployeePageReply<Roster_V1_ListEmployeesResponse>(
          written: page,
          format: .json,
          mask: mask,
          nextPageToken: token
        )
        #expect(reply.json() == fromEmployees.json(), "round \(round): \(mask)")
        #expect(reply.message == fromEmployees.message, "round \(round): \(mask)")
        #expect(reply.rowCount == employees.count)
      }
    }
  }

  @Test("the same text as SwiftProtobuf writes, for employees with plain text")
  func sameText() throws {
    var employee = Employee()
    employee.guid = "0b0e4f3c-52a4-4a43-9d35-c4b4bd1c09e1"
    employee.name = "José Núñez"
    employee.department = "Sales"
    employee.active = true
    employee.startDate = "2011-06-15"
    employee.vacationDays = 12
    employee.thumbnail = [0xFF, 0xD8, 0xFF, 0xE0, 0x01]
    employee.pictureEtag = String(repeating: "ab", count: 32)
    employee.salesCount = 1_234_567_890_123
    var options = JSONEncodingOptions()
    options.useDeterministicOrdering = true
    for millis: Int64 in [0, 1_700_000_000_000, 1_700_000_000_007, 86_399_999, 253_402_300_799_000]
    {
      employee.updateTimeMillis = millis
      for mask in [EmployeeReadMask.all, .written] {
        let reply = EmployeeReply(employee: employee, mask: mask)
        let expected = try reply.message.jsonString(options: options)
        #expect(String(decoding: reply.json(), as: UTF8.self) == expected)
      }
    }
    let page = EmployeePageReply<Roster_V1_ListEmployeesResponse>(
      employees: [employee, Employee()],
      mask: .all,
      nextPageToken: "next"
    )
    #expect(
      String(decoding: page.json(), as: UTF8.self)
        == (try page.message.jsonString(options: options))
    )
    let empty = EmployeePageReply<Roster_V1_ListEmployeesResponse>(
      employees: [],
      mask: .all,
      nextPageToken: ""
    )
    #expect(String(decoding: empty.json(), as: UTF8.self) == "{}")
  }
}
