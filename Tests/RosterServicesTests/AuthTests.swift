import GRPCCore
import GRPCInProcessTransport
import RosterDomain
import RosterProto
import RosterServices
import TestSupport
import Testing

@Suite("Authentication and roles", .timeLimit(.minutes(10)))
struct AuthTests {
  /// One token of each role, and the table that holds their hashes.
  static func tokens() throws -> (table: TokenTable, reader: String, writer: String, admin: String)
  {
    let reader = TokenTable.makeToken(role: .reader, label: "ci reader")
    let writer = TokenTable.makeToken(role: .writer)
    let admin = TokenTable.makeToken(role: .admin)
    let text = "# Roster tokens\n\n\(reader.line)\n\(writer.line)\n\(admin.line)\n"
    return (try TokenTable(parsing: text), reader.token, writer.token, admin.token)
  }

  @Test("every Roster method has a role of its own; health and reflection are open")
  func everyMethodHasARole() throws {
    let methods =
      Roster_V1_Directory.Method.descriptors + Roster_V1_Pictures.Method.descriptors
      + Roster_V1_Analytics.Method.descriptors
    for method in methods {
      #expect(
        MethodPolicies.server.byMethod[method]?.role != nil,
        "\(method) falls through to the default"
      )
    }
    #expect(Role.required(for: Roster_V1_Directory.Method.GetEmployee.descriptor) == .reader)
    #expect(Role.required(for: Roster_V1_Directory.Method.UpsertEmployees.descriptor) == .writer)
    #expect(Role.required(for: Roster_V1_Directory.Method.DeleteEmployees.descriptor) == .admin)
    #expect(Role.required(for: Roster_V1_Analytics.Method.DeleteSales.descriptor) == .admin)
    #expect(Role.required(for: Grpc_Health_V1_Health.Method.Check.descriptor) == nil)
    #expect(
      Role.required(
        for: Grpc_Reflection_V1alpha_ServerReflection.Method.ServerReflectionInfo.descriptor
      ) == nil
    )
    let unknown = MethodDescriptor(fullyQualifiedService: "roster.v1.Later", method: "Anything")
    #expect(Role.required(for: unknown) == .admin)
  }

  @Test("a tokens file holds hashes only, and a bad line is named")
  func tokensFile() throws {
    let (token, line) = TokenTable.makeToken(role: .writer, label: "deploy bot")
    #expect(token.hasPrefix("rst_") && token.count > 40)
    #expect(!line.contains(token))
    #expect(line.hasPrefix("writer ") && line.hasSuffix(" deploy bot"))
    let table = try TokenTable(parsing: line)
    #expect(table.role(of: token) == .writer)
    #expect(table.role(of: token + "x") == nil)
    #expect(table.role(of: "") == nil)
    #expect(throws: TokenTable.FormatError.self) { try TokenTable(parsing: "reader abc\n") }
    do {
      _ = try TokenTable(parsing: "# ok\n\(line)\nroot \(line.split(separator: " ")[1])\n")
      Issue.record("an unknown role was accepted")
    } catch let error as TokenTable.FormatError {
      #expect(error.message.hasPrefix("line 3:"))
    }
  }

  @Test(
    "no token or an unknown one is UNAUTHENTICATED; a low role is PERMISSION_DENIED and changes nothing",
    arguments: TestBackend.available
  )
  func roles(_ backend: TestBackend) async throws {
    let (table, reader, writer, admin) = try Self.tokens()
    try await withTemporaryStore(on: backend, employees: 20) { store async throws in
      func client<T: Sendable>(
        _ token: String?,
        _ body: (Roster_V1_Directory.Client<InProcessTransport.Client>) async throws -> T
      ) async throws -> T {
        try await withInProcessClient(
          store: store,
          tokens: table,
          clientInterceptors: token.map { [BearerTokenInterceptor(token: $0)] } ?? []
        ) { client async throws in
          try await body(Roster_V1_Directory.Client(wrapping: client))
        }
      }
      try await client(nil) { directory async throws in
        await expectStatus(.unauthenticated, mentioning: "bearer token") {
          _ = try await directory.countEmployees(.init())
        }
      }
      try await client("rst_not-a-real-token") { directory async throws in
        await expectStatus(.unauthenticated, mentioning: "not known") {
          _ = try await directory.countEmployees(.init())
        }
      }
      try await client(reader) { directory async throws in
        #expect(try await directory.countEmployees(.init()).count == 20)
        await expectStatus(.permissionDenied, mentioning: "writer") {
          _ = try await directory.createEmployee(
            .with {
              $0.employee = .with {
                $0.name = "Eve"
                $0.department = "Design"
              }
            }
          )
        }
      }
      try await client(writer) { directory async throws in
        _ = try await directory.createEmployee(
          .with {
            $0.employee = .with {
              $0.name = "Wendy"
              $0.department = "Design"
              $0.startDate = "2024-01-02"
            }
          }
        )
        await expectStatus(.permissionDenied, mentioning: "admin") {
          _ = try await directory.deleteEmployees(
            .with {
              $0.all = true
              $0.limit = 100
            }
          )
        }
      }
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 21)
      try await client(admin) { directory async throws in
        let deleted = try await directory.deleteEmployees(
          .with {
            $0.department = "Design"
            $0.limit = 1000
          }
        )
        #expect(deleted.deleted >= 1)
      }
      // Probes and discovery need no token.
      try await withInProcessClient(store: store, tokens: table) { client async throws in
        let health = Grpc_Health_V1_Health.Client(wrapping: client)
        #expect(try await health.check(.init()).status == .serving)
      }
    }
  }
}
