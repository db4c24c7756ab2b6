import GRPCCore
import GRPCInProcessTransport
import RosterDomain
import RosterProto
import RosterSeed
import RosterStore
import SwiftProtobuf
import TestSupport
import Testing

/// Every bad input gets a clear status whose message names the field.
@Suite("Bad input", .timeLimit(.minutes(10)))
struct BadInputTests {
  typealias Directory = Roster_V1_Directory.Client<InProcessTransport.Client>

  struct Case: Sendable, CustomTestStringConvertible {
    var name: String
    var code: RPCError.Code
    var mentioning: String
    var call: @Sendable (Directory) async throws -> Void
    var testDescription: String { self.name }
  }

  static let unknownGUID = "0a0a0a0a-0000-4000-8000-000000000000"
  /// The first of the 30 demo employees every case starts with.
  static let existingGUID = DemoData(count: 1).first { _ in true }!.employee.guid

  /// A valid CreateEmployee payload, changed by `edit`.
  static func newEmployee(_ edit: (inout Roster_V1_Employee) -> Void) -> Roster_V1_Employee {
    var employee = Roster_V1_Employee.with {
      $0.name = "Ada Valid"
      $0.department = "Engineering"
      $0.startDate = "2021-03-01"
    }
    edit(&employee)
    return employee
  }

  static let cases: [Case] = [
    Case(name: "negative page_size", code: .invalidArgument, mentioning: "page_size") {
      _ = try await $0.listEmployees(.with { $0.pageSize = -1 })
    },
    Case(name: "garbage page_token", code: .invalidArgument, mentioning: "page_token") {
      _ = try await $0.listEmployees(.with { $0.pageToken = "not a token!" })
    },
    Case(name: "tampered page_token", code: .invalidArgument, mentioning: "page_token") {
      let token = try await $0.listEmployees(.with { $0.pageSize = 2 }).nextPageToken
      var bytes = Array(token.utf8)
      bytes[bytes.count - 3] =
        bytes[bytes.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
      _ = try await $0.listEmployees(
        .with { $0.pageToken = String(decoding: bytes, as: UTF8.self) }
      )
    },
    Case(name: "page_token from other filters", code: .invalidArgument, mentioning: "page_token") {
      let token = try await $0.listEmployees(
        .with {
          $0.pageSize = 2
          $0.active = true
        }
      ).nextPageToken
      try #require(!token.isEmpty)
      _ = try await $0.listEmployees(
        .with {
          $0.pageToken = token
          $0.active = false
        }
      )
    },
    Case(name: "page_token from another order", code: .invalidArgument, mentioning: "page_token") {
      let token = try await $0.listEmployees(.with { $0.pageSize = 2 }).nextPageToken
      _ = try await $0.listEmployees(
        .with {
          $0.pageToken = token
          $0.orderBy = .startDate
        }
      )
    },
    Case(name: "unknown read_mask path", code: .invalidArgument, mentioning: "read_mask") {
      _ = try await $0.listEmployees(
        .with { $0.readMask = Google_Protobuf_FieldMask(protoPaths: ["name", "salary"]) }
      )
    },
    Case(name: "unknown order_by", code: .invalidArgument, mentioning: "order_by") {
      _ = try await $0.listEmployees(.with { $0.orderBy = .UNRECOGNIZED(42) })
    },
    Case(name: "over-long name_contains", code: .invalidArgument, mentioning: "name_contains") {
      _ = try await $0.listEmployees(
        .with { $0.nameContains = String(repeating: "a", count: 201) }
      )
    },
    Case(name: "stream with negative page_size", code: .invalidArgument, mentioning: "page_size") {
      try await $0.streamEmployees(.with { $0.pageSize = -5 }) { response in
        for try await _ in response.messages {}
      }
    },
    Case(name: "count with over-long department", code: .invalidArgument, mentioning: "department")
    {
      _ = try await $0.countEmployees(.with { $0.department = String(repeating: "d", count: 101) })
    },
    Case(name: "get without guid", code: .invalidArgument, mentioning: "guid") {
      _ = try await $0.getEmployee(.init())
    },
    Case(name: "get with malformed guid", code: .invalidArgument, mentioning: "guid") {
      _ = try await $0.getEmployee(.with { $0.guid = "12345" })
    },
    Case(name: "get unknown guid", code: .notFound, mentioning: unknownGUID) {
      _ = try await $0.getEmployee(.with { $0.guid = unknownGUID })
    },
    Case(name: "get with unknown read_mask path", code: .invalidArgument, mentioning: "read_mask") {
      _ = try await $0.getEmployee(
        .with {
          $0.guid = unknownGUID
          $0.readMask = Google_Protobuf_FieldMask(protoPaths: ["password"])
        }
      )
    },
    Case(name: "batch get without guids", code: .invalidArgument, mentioning: "guids") {
      _ = try await $0.batchGetEmployees(.init())
    },
    Case(name: "batch get of 1001 guids", code: .invalidArgument, mentioning: "guids") {
      _ = try await $0.batchGetEmployees(
        .with { $0.guids = Array(repeating: unknownGUID, count: 1001) }
      )
    },
    Case(name: "batch get with a malformed guid", code: .invalidArgument, mentioning: "guids") {
      _ = try await $0.batchGetEmployees(.with { $0.guids = [unknownGUID, "nope"] })
    },
    Case(name: "create with an empty name", code: .invalidArgument, mentioning: "name") {
      _ = try await $0.createEmployee(.with { $0.employee = Self.newEmployee { $0.name = " " } })
    },
    Case(name: "create with a malformed guid", code: .invalidArgument, mentioning: "employee.guid")
    {
      _ = try await $0.createEmployee(.with { $0.employee = Self.newEmployee { $0.guid = "x-1" } })
    },
    Case(
      name: "create with a date that does not exist",
      code: .invalidArgument,
      mentioning: "start_date"
    ) {
      _ = try await $0.createEmployee(
        .with { $0.employee = Self.newEmployee { $0.startDate = "2021-02-29" } }
      )
    },
    Case(
      name: "create with negative vacation_days",
      code: .invalidArgument,
      mentioning: "vacation_days"
    ) {
      _ = try await $0.createEmployee(
        .with { $0.employee = Self.newEmployee { $0.vacationDays = -1 } }
      )
    },
    Case(name: "create with an over-long about", code: .invalidArgument, mentioning: "about") {
      _ = try await $0.createEmployee(
        .with { $0.employee = Self.newEmployee { $0.about = String(repeating: "é", count: 4001) } }
      )
    },
    Case(name: "create with a taken guid", code: .alreadyExists, mentioning: Self.existingGUID) {
      _ = try await $0.createEmployee(
        .with { $0.employee = Self.newEmployee { $0.guid = Self.existingGUID.uppercased() } }
      )
    },
    Case(name: "update of an unknown guid", code: .notFound, mentioning: Self.unknownGUID) {
      _ = try await $0.updateEmployee(
        .with {
          $0.employee = Self.newEmployee { $0.guid = Self.unknownGUID }
          $0.updateMask.paths = ["name"]
        }
      )
    },
    Case(name: "update of an immutable path", code: .invalidArgument, mentioning: "sales_count") {
      _ = try await $0.updateEmployee(
        .with {
          $0.employee.guid = Self.existingGUID
          $0.updateMask.paths = ["name", "sales_count"]
        }
      )
    },
    Case(name: "update of an unknown path", code: .invalidArgument, mentioning: "salary") {
      _ = try await $0.updateEmployee(
        .with {
          $0.employee.guid = Self.existingGUID
          $0.updateMask.paths = ["salary"]
        }
      )
    },
    Case(name: "update that empties the name", code: .invalidArgument, mentioning: "name") {
      _ = try await $0.updateEmployee(
        .with {
          $0.employee.guid = Self.existingGUID
          $0.updateMask.paths = ["name"]
        }
      )
    },
    Case(
      name: "update with an over-long department",
      code: .invalidArgument,
      mentioning: "department"
    ) {
      _ = try await $0.updateEmployee(
        .with {
          $0.employee.guid = Self.existingGUID
          $0.employee.department = String(repeating: "d", count: 101)
        }
      )
    },
    Case(name: "update without a guid", code: .invalidArgument, mentioning: "employee.guid") {
      _ = try await $0.updateEmployee(.with { $0.employee.name = "No Guid" })
    },
    Case(name: "delete with a malformed guid", code: .invalidArgument, mentioning: "guid") {
      _ = try await $0.deleteEmployee(.with { $0.guid = "nope" })
    },
    Case(name: "delete of an unknown guid", code: .notFound, mentioning: Self.unknownGUID) {
      _ = try await $0.deleteEmployee(.with { $0.guid = Self.unknownGUID })
    },
    Case(name: "batch update with no filter and no all", code: .invalidArgument, mentioning: "all")
    {
      _ = try await $0.batchUpdateEmployees(.with { $0.setActive = false })
    },
    Case(name: "batch update that sets nothing", code: .invalidArgument, mentioning: "set_active") {
      _ = try await $0.batchUpdateEmployees(.with { $0.all = true })
    },
    Case(
      name: "batch update to negative vacation_days",
      code: .invalidArgument,
      mentioning: "vacation_days"
    ) {
      _ = try await $0.batchUpdateEmployees(
        .with {
          $0.department = "Sales"
          $0.setVacationDays = -3
        }
      )
    },
    Case(
      name: "batch update to an empty department",
      code: .invalidArgument,
      mentioning: "department"
    ) {
      _ = try await $0.batchUpdateEmployees(
        .with {
          $0.all = true
          $0.setDepartment = ""
        }
      )
    },
    Case(name: "delete many with no filter and no all", code: .invalidArgument, mentioning: "all") {
      _ = try await $0.deleteEmployees(.with { $0.limit = 5 })
    },
    Case(name: "delete many with a negative limit", code: .invalidArgument, mentioning: "limit") {
      _ = try await $0.deleteEmployees(
        .with {
          $0.all = true
          $0.limit = -1
        }
      )
    },
    Case(name: "watch from a malformed token", code: .invalidArgument, mentioning: "after_token") {
      try await $0.watchChanges(.with { $0.afterToken = "abc" }) { response in
        for try await _ in response.messages {}
      }
    },
    Case(name: "watch from a token past the end", code: .outOfRange, mentioning: "after_token") {
      try await $0.watchChanges(.with { $0.afterToken = "99999999" }) { response in
        for try await _ in response.messages {}
      }
    },
  ]

  @Test("answers with the right status, naming the field", arguments: TestBackend.available, cases)
  func badInput(_ backend: TestBackend, _ badCase: Case) async throws {
    try await withTemporaryStore(on: backend, employees: 30) { store async throws in
      let before = try await store.countEmployees(filter: EmployeeFilter())
      let changesBefore = store.latestChange
      let digest = try await Self.digest(store)
      try await withInProcessClient(store: store) { client async throws in
        await expectStatus(badCase.code, mentioning: badCase.mentioning) {
          try await badCase.call(Roster_V1_Directory.Client(wrapping: client))
        }
      }
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == before)
      #expect(store.latestChange == changesBefore, "a refused request records no change")
      #expect(try await Self.digest(store) == digest, "a refused request changes no row")
    }
  }

  /// Every employee as stored, to compare before and after a refused request.
  static func digest(_ store: any StoreBackend) async throws -> [Employee] {
    try await store.employeePage(
      fields: .all,
      filter: EmployeeFilter(),
      order: .name,
      after: nil,
      limit: 1000
    ).employees
  }

  @Test(
    "bad analytics requests get a clear status naming the field",
    arguments: TestBackend.available
  )
  func analytics(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 5) { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let analytics = Roster_V1_Analytics.Client(wrapping: client)
        await expectStatus(.invalidArgument, mentioning: "function is required") {
          _ = try await analytics.aggregateSales(.init())
        }
        await expectStatus(.invalidArgument, mentioning: "function 42") {
          _ = try await analytics.aggregateSales(.with { $0.function = .UNRECOGNIZED(42) })
        }
        await expectStatus(.invalidArgument, mentioning: "group_by 9") {
          _ = try await analytics.aggregateSales(
            .with {
              $0.function = .count
              $0.groupBy = .UNRECOGNIZED(9)
            }
          )
        }
        await expectStatus(.invalidArgument, mentioning: "after to_date") {
          _ = try await analytics.aggregateSales(
            .with {
              $0.function = .sum
              $0.fromDate = "2024-05-01"
              $0.toDate = "2024-04-01"
            }
          )
        }
        await expectStatus(.invalidArgument, mentioning: "from_date") {
          _ = try await analytics.aggregateSales(
            .with {
              $0.function = .sum
              $0.fromDate = "2024-02-30"
            }
          )
        }
        await expectStatus(.invalidArgument, mentioning: "group_by") {
          _ = try await analytics.aggregateEmployees(
            .with {
              $0.function = .avg
              $0.groupBy = .month
            }
          )
        }
        await expectStatus(.invalidArgument, mentioning: "month needs a year") {
          _ = try await analytics.salesCalendar(.with { $0.month = 3 })
        }
        await expectStatus(.invalidArgument, mentioning: "month 13") {
          _ = try await analytics.salesCalendar(
            .with {
              $0.year = 2024
              $0.month = 13
            }
          )
        }
        await expectStatus(.notFound, mentioning: "Nowhere") {
          _ = try await analytics.departmentSummary(.with { $0.department = "Nowhere" })
        }
        await expectStatus(.notFound, mentioning: "no employee") {
          _ = try await analytics.employeeSales(
            .with { $0.guid = "00000000-0000-4000-8000-000000000000" }
          )
        }
        await expectStatus(.invalidArgument, mentioning: "before_date") {
          _ = try await analytics.deleteSales(.init())
        }
        let headcounts = try await analytics.departmentHeadcounts(.init())
        #expect(headcounts.departments.map(\.headcount).reduce(0, +) == 5)
        #expect(
          headcounts.departments.map(\.department)
            == headcounts.departments.map(\.department).sorted()
        )
      }
    }
  }
}
