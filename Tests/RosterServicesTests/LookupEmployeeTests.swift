import GRPCCore
import RosterDomain
import RosterProto
import TestSupport
import Testing

/// LookupEmployee over gRPC, on every backend: the store's lookup is the store contract's
/// (`StoreContract.lookupByEmail`); these are the request's checks and the reply's mask.
@Suite("LookupEmployee", .timeLimit(.minutes(10)))
struct LookupEmployeeTests {
  static let grace: Employee = {
    var employee = makeEmployee(name: "Grace Hopper", department: "Engineering", active: true)
    employee.email = "Grace.Hopper@Example.com"
    return employee
  }()

  @Test("an e-mail address in any ASCII case finds its employee", arguments: TestBackend.available)
  func lookup(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 10, extra: [Self.grace]) {
      store async throws in
      try await withInProcessClient(store: store) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        let found = try await directory.lookupEmployee(
          .with { $0.email = "grace.hopper@EXAMPLE.com" }
        )
        #expect(found.guid == Self.grace.guid)
        #expect(found.name == "Grace Hopper" && found.department == "Engineering")
        #expect(found.email == "Grace.Hopper@Example.com")
        let masked = try await directory.lookupEmployee(
          .with {
            $0.email = "GRACE.HOPPER@example.com"
            $0.readMask = .with { $0.paths = ["guid", "email"] }
          }
        )
        #expect(masked.guid == Self.grace.guid && !masked.hasName && masked.hasEmail)

        await expectStatus(.invalidArgument, mentioning: "email is required") {
          _ = try await directory.lookupEmployee(.with { $0.email = "" })
        }
        await expectStatus(.invalidArgument, mentioning: "email is longer than 254") {
          _ = try await directory.lookupEmployee(
            .with { $0.email = String(repeating: "a", count: 250) + "@x.io" }
          )
        }
        await expectStatus(.invalidArgument, mentioning: "salary") {
          _ = try await directory.lookupEmployee(
            .with {
              $0.email = "grace.hopper@example.com"
              $0.readMask = .with { $0.paths = ["salary"] }
            }
          )
        }
        await expectStatus(.notFound, mentioning: "no employee has that email") {
          _ = try await directory.lookupEmployee(.with { $0.email = "nobody@example.com" })
        }
      }
    }
  }
}
