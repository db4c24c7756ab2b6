import GRPCCore
import GRPCInProcessTransport
import RosterProto
import RosterStore
import SwiftProtobuf
import Testing
import TestSupport

/// Every bad input gets a clear status whose message names the field.
@Suite("Bad input")
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
      bytes[bytes.count - 3] = bytes[bytes.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
      _ = try await $0.listEmployees(.with { $0.pageToken = String(decoding: bytes, as: UTF8.self) })
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
    Case(name: "count with over-long department", code: .invalidArgument, mentioning: "department") {
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
    Case(name: "create, not built yet", code: .unimplemented, mentioning: "CreateEmployee") {
      _ = try await $0.createEmployee(.init())
    },
    Case(name: "watch, not built yet", code: .unimplemented, mentioning: "WatchChanges") {
      try await $0.watchChanges(.init()) { response in
        for try await _ in response.messages {}
      }
    },
  ]

  @Test("answers with the right status, naming the field", arguments: cases)
  func badInput(_ badCase: Case) async throws {
    try await withTemporaryStore(employees: 30) { store async throws in
      let before = try store.countEmployees(filter: EmployeeFilter())
      try await withInProcessClient(store: store) { client async throws in
        await expectStatus(badCase.code, mentioning: badCase.mentioning) {
          try await badCase.call(Roster_V1_Directory.Client(wrapping: client))
        }
      }
      #expect(try store.countEmployees(filter: EmployeeFilter()) == before)
    }
  }

  @Test("services not built yet answer UNIMPLEMENTED")
  func unimplemented() async throws {
    try await withTemporaryStore { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        await expectStatus(.unimplemented, mentioning: "DepartmentHeadcounts") {
          _ = try await Roster_V1_Analytics.Client(wrapping: client).departmentHeadcounts(.init())
        }
        await expectStatus(.unimplemented, mentioning: "GetThumbnail") {
          _ = try await Roster_V1_Pictures.Client(wrapping: client).getThumbnail(.init())
        }
      }
    }
  }
}
