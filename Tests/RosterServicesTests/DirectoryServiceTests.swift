import GRPCCore
import GRPCInProcessTransport
import RosterDomain
import RosterProto
import RosterServices
import SwiftProtobuf
import Synchronization
import TestSupport
import Testing

@Suite("Directory service", .timeLimit(.minutes(10)))
struct DirectoryServiceTests {
  static let nunez = makeEmployee(name: "José Núñez", department: "Legal", active: false)

  @Test(
    "ListEmployees pages through everyone with tokens, for every order",
    arguments: TestBackend.available
  )
  func listPages(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 230) { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        for order in [Roster_V1_EmployeeOrder.name, .startDate, .department] {
          var request = Roster_V1_ListEmployeesRequest()
          request.orderBy = order
          var guids: [String] = []
          var pages = 0
          repeat {
            let response = try await directory.listEmployees(request)
            guids += response.employees.map(\.guid)
            request.pageToken = response.nextPageToken
            pages += 1
          } while !request.pageToken.isEmpty
          #expect(pages == 5, "default page size is 50")
          #expect(guids.count == 230)
          #expect(Set(guids).count == 230)
        }
      }
    }
  }

  @Test("page_size is capped at 1000", arguments: TestBackend.available)
  func pageSizeCap(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 1100) { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let response = try await Roster_V1_Directory.Client(wrapping: client).listEmployees(
          .with { $0.pageSize = 5000 }
        )
        #expect(response.employees.count == 1000)
        #expect(!response.nextPageToken.isEmpty)
      }
    }
  }

  @Test("the read mask limits the fields sent", arguments: TestBackend.available)
  func readMask(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 5, extra: [Self.nunez]) {
      store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        let partial = try await directory.getEmployee(
          .with {
            $0.guid = Self.nunez.guid.uppercased()
            $0.readMask = Google_Protobuf_FieldMask(protoPaths: ["name", "has_picture"])
          }
        )
        #expect(partial == .with { $0.name = "José Núñez" })
        let full = try await directory.getEmployee(.with { $0.guid = Self.nunez.guid })
        #expect(full.guid == Self.nunez.guid)
        #expect(full.department == "Legal")
        #expect(full.startDate == Self.nunez.startDate)
        #expect(full.email == Self.nunez.email)
        #expect(full.vacationDays == 10)
        #expect(full.hasUpdateTime)
        let listed = try await directory.listEmployees(
          .with {
            $0.nameContains = "NUÑ"
            $0.readMask = Google_Protobuf_FieldMask(protoPaths: ["guid"])
          }
        )
        #expect(listed.employees == [.with { $0.guid = Self.nunez.guid }])
      }
    }
  }

  @Test("filters apply to List, Stream and Count alike", arguments: TestBackend.available)
  func filters(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 400, extra: [Self.nunez]) {
      store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        let count = try await directory.countEmployees(
          .with {
            $0.department = "Sales"
            $0.active = true
          }
        ).count
        #expect(count > 0)
        var listed: [Roster_V1_Employee] = []
        var request = Roster_V1_ListEmployeesRequest.with {
          $0.department = "Sales"
          $0.active = true
          $0.pageSize = 7
        }
        repeat {
          let page = try await directory.listEmployees(request)
          listed += page.employees
          request.pageToken = page.nextPageToken
        } while !request.pageToken.isEmpty
        #expect(Int64(listed.count) == count)
        #expect(listed.allSatisfy { $0.department == "Sales" && $0.active })
        let jose = try await directory.countEmployees(.with { $0.nameContains = "jose" }).count
        let all = try await directory.countEmployees(.init()).count
        #expect(jose >= 1 && jose < all)
      }
    }
  }

  @Test(
    "StreamEmployees sends every employee in pages whose tokens resume the listing",
    arguments: TestBackend.available
  )
  func stream(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 260) { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        let request = Roster_V1_ListEmployeesRequest.with {
          $0.pageSize = 100
          $0.orderBy = .startDate
        }
        let pages = try await directory.streamEmployees(request) { response in
          var pages: [Roster_V1_EmployeePage] = []
          for try await page in response.messages { pages.append(page) }
          return pages
        }
        #expect(pages.map(\.employees.count) == [100, 100, 60])
        #expect(pages.last?.nextPageToken == "")
        let everyone = pages.flatMap(\.employees).map(\.guid)
        #expect(Set(everyone).count == 260)

        var resume = request
        resume.pageToken = pages[0].nextPageToken
        let rest = try await directory.listEmployees(
          .with {
            $0.pageSize = 1000
            $0.orderBy = .startDate
            $0.pageToken = pages[0].nextPageToken
          }
        )
        #expect(rest.employees.map(\.guid) == Array(everyone.dropFirst(100)))
        let resumed = try await directory.streamEmployees(resume) { response in
          var guids: [String] = []
          for try await page in response.messages { guids += page.employees.map(\.guid) }
          return guids
        }
        #expect(resumed == Array(everyone.dropFirst(100)))
      }
    }
  }

  @Test(
    "StreamEmployees over gRPC writes each page straight from the store's employees, in ListEmployees' bytes",
    arguments: TestBackend.available
  )
  func streamWrittenDirect(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 130) { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        for mask in [[], ["name", "update_time", "thumbnail"]] {
          let request = Roster_V1_ListEmployeesRequest.with {
            $0.pageSize = 50
            $0.readMask = .with { $0.paths = mask }
          }
          let written = DirectoryPageStreams.pagesWritten.load(ordering: .relaxed)
          let streamed = try await directory.streamEmployees(request) { response in
            var pages: [[UInt8]] = []
            for try await page in response.messages { pages.append(try page.serializedBytes()) }
            return pages
          }
          #expect(
            DirectoryPageStreams.pagesWritten.load(ordering: .relaxed) - written >= 3,
            "mask \(mask)"
          )
          // The same pages through ListEmployees, one call each (grpc-swift's path: messages).
          var listed: [[UInt8]] = []
          var token = ""
          repeat {
            var page = request
            page.pageToken = token
            let response = try await directory.listEmployees(page)
            listed.append(try response.serializedBytes())
            token = response.nextPageToken
          } while !token.isEmpty
          #expect(streamed.count == 3)
          #expect(streamed == listed, "mask \(mask)")
        }
      }
    }
  }

  @Test(
    "BatchGetEmployees answers in request order and is all or nothing",
    arguments: TestBackend.available
  )
  func batchGet(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 20, extra: [Self.nunez]) {
      store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        let some = try await directory.listEmployees(.with { $0.pageSize = 3 }).employees
          .map(\.guid)
        let asked = [some[2], Self.nunez.guid, some[0], some[2]]
        let response = try await directory.batchGetEmployees(.with { $0.guids = asked })
        #expect(response.employees.map(\.guid) == asked)

        let unknown = "0b0b0b0b-0000-4000-8000-000000000000"
        await expectStatus(.notFound, mentioning: unknown) {
          _ = try await directory.batchGetEmployees(.with { $0.guids = [some[0], unknown] })
        }
      }
    }
  }
}
