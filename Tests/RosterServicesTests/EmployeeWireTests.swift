import RosterDomain
import RosterProto
import RosterStore
import SwiftProtobuf
import Testing

@testable import RosterServices

/// `EmployeeWire` writes a page's protobuf bytes straight from the store's employees: they must
/// be the bytes SwiftProtobuf writes for the same page built as messages, for every mask (random
/// pages: `EmployeeCodecPropertyTests`), also when written row by row as the store reads them.
@Suite("Employees and pages written straight to protobuf", .timeLimit(.minutes(10)))
struct EmployeeWireTests {
  @Test("pages written row by row as the store reads them: the same bytes as SwiftProtobuf")
  func writtenRows() throws {
    var random = SplitMix64(seed: 43)
    var edge = Employee()
    edge.about = String(repeating: "é", count: 3_000)
    edge.vacationDays = -3
    edge.thumbnail = []
    edge.pictureEtag = ""
    for round in 0 ..< 300 {
      let employees =
        (0 ..< Int(random.next() % 8)).map { _ in Self.employee(&random) }
        + (round % 10 == 0 ? [edge] : [])
      let mask = round == 0 ? EmployeeReadMask.all : Self.mask(&random)
      let token =
        random.next() % 3 == 0 ? "" : String(repeating: "t", count: Int(random.next() % 200))
      let expected: [UInt8] = try EmployeePageReply<Roster_V1_ListEmployeesResponse>(
        employees: employees,
        mask: mask,
        nextPageToken: token
      ).message.serializedBytes()
      for page in Self.writtenPages(employees, EmployeeWire.Rows(mask: mask)) {
        #expect(page.rowCount == employees.count)
        let reply = EmployeePageReply<Roster_V1_ListEmployeesResponse>(
          written: page,
          format: .binary,
          mask: mask,
          nextPageToken: token
        )
        #expect(reply.binary() == expected, "round \(round): \(mask)")
        #expect(reply.rowCount == employees.count)
      }
    }
  }

  /// `employees` written by `writer` twice: from rows, as SQLite's reader hands them over, and
  /// from employees, as the default does.
  static func writtenPages(
    _ employees: [Employee],
    _ writer: some EmployeeRowWriter
  ) -> [WrittenEmployeePage] {
    var fromRows = WrittenEmployeePage(reserving: employees.count)
    var fromValues = WrittenEmployeePage(reserving: employees.count)
    for employee in employees {
      Self.withRow(employee) { writer.append($0, to: &fromRows.bytes) }
      fromRows.append(())
      writer.append(employee, to: &fromValues.bytes)
      fromValues.append(())
    }
    return [fromRows, fromValues]
  }

  /// `employee` as a row of bytes, as the store hands one to a writer.
  static func withRow(_ employee: Employee, _ body: (EmployeeRow) -> Void) {
    let texts = [
      employee.guid, employee.name, employee.department, employee.email, employee.phone,
      employee.address,
      employee.about, employee.startDate, employee.pictureEtag ?? "",
    ]
    let bytes = texts.flatMap { Array($0.utf8) } + (employee.thumbnail ?? [])
    bytes.withUnsafeBufferPointer { all in
      var offset = 0
      func next(_ count: Int) -> UnsafeBufferPointer<UInt8> {
        defer { offset += count }
        return UnsafeBufferPointer(rebasing: all[offset ..< offset + count])
      }
      var row = EmployeeRow()
      row.id = employee.id
      row.guid = next(employee.guid.utf8.count)
      row.name = next(employee.name.utf8.count)
      row.department = next(employee.department.utf8.count)
      row.email = next(employee.email.utf8.count)
      row.phone = next(employee.phone.utf8.count)
      row.address = next(employee.address.utf8.count)
      row.about = next(employee.about.utf8.count)
      row.startDate = next(employee.startDate.utf8.count)
      let etag = next((employee.pictureEtag ?? "").utf8.count)
      row.pictureEtag = employee.pictureEtag == nil ? nil : etag
      let thumbnail = next(employee.thumbnail?.count ?? 0)
      row.thumbnail = employee.thumbnail == nil ? nil : thumbnail
      row.active = employee.active
      row.vacationDays = employee.vacationDays
      row.salesCount = employee.salesCount
      row.updateTimeMillis = employee.updateTimeMillis
      #expect(Employee(row) == employee)
      body(row)
    }
  }

  @Test("edge values: empty strings, long text, large and negative numbers, no picture")
  func edges() throws {
    var employee = Employee()
    employee.about = String(repeating: "é", count: 3_000)  // a two-byte length prefix and more
    employee.vacationDays = -3
    employee.salesCount = Int64.max
    employee.updateTimeMillis = -1_500
    employee.thumbnail = []
    var other = Employee()
    other.guid = "x"
    other.vacationDays = Int.max
    other.salesCount = -1
    other.pictureEtag = ""
    other.thumbnail = [0xFF, 0xD8, 0x00]
    other.updateTimeMillis = 1_700_000_000_123
    for employees in [[], [employee], [employee, other], [Employee()]] {
      let reply = EmployeePageReply<Roster_V1_ListEmployeesResponse>(
        employees: employees,
        mask: .all,
        nextPageToken: ""
      )
      #expect(reply.binary() == (try reply.message.serializedBytes() as [UInt8]))
      for employee in employees {
        let one = EmployeeReply(employee: employee, mask: .all)
        #expect(one.binary() == (try one.message.serializedBytes() as [UInt8]))
      }
    }
  }

  static func employee(_ random: inout SplitMix64) -> Employee {
    func text(_ limit: UInt64) -> String {
      let alphabet = Array("abcdefghij Ñúé—日本")
      return String(
        (0 ..< Int(random.next() % limit)).map { _ in
          alphabet[Int(random.next() % UInt64(alphabet.count))]
        }
      )
    }
    var employee = Employee()
    employee.id = Int64(random.next() % 1_000_000)
    employee.guid = random.next() % 5 == 0 ? "" : text(40)
    employee.name = text(30)
    employee.department = text(12)
    employee.email = text(30)
    employee.phone = text(15)
    employee.address = text(80)
    employee.about = text(400)
    employee.active = random.next() % 2 == 0
    employee.startDate = text(11)
    employee.vacationDays = Int(Int64(bitPattern: random.next()) % 100)
    employee.thumbnail =
      random.next() % 3 == 0
      ? nil : (0 ..< Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    employee.pictureEtag = random.next() % 3 == 0 ? nil : text(64)
    employee.salesCount = random.next() % 4 == 0 ? 0 : Int64(bitPattern: random.next()) % 1_000_000
    employee.updateTimeMillis =
      random.next() % 5 == 0 ? 0 : Int64(bitPattern: random.next()) % 4_000_000_000_000
    return employee
  }

  static func mask(_ random: inout SplitMix64) -> EmployeeReadMask {
    EmployeeReadMask(
      fields: EmployeeFields(
        rawValue: UInt32(truncatingIfNeeded: random.next()) & EmployeeFields.all.rawValue
      ),
      hasPicture: random.next() % 2 == 0,
      pictureEtag: random.next() % 2 == 0
    )
  }
}
