import GRPCCore
import GRPCInProcessTransport
import RosterProto
import RosterServices
import TestSupport
import Testing

@Suite("Health service", .timeLimit(.minutes(10)))
struct HealthServiceTests {
  @Test("Check reports each known service, and NOT_FOUND for others")
  func check() async throws {
    let health = HealthService(services: ["roster.v1.Directory"])
    try await withInProcessClient(services: [health]) { client async throws in
      let checker = Grpc_Health_V1_Health.Client(wrapping: client)
      #expect(try await checker.check(.init()).status == .serving)
      #expect(
        try await checker.check(.with { $0.service = "roster.v1.Directory" }).status == .serving
      )
      health.setServing(false, service: "roster.v1.Directory")
      #expect(
        try await checker.check(.with { $0.service = "roster.v1.Directory" }).status == .notServing
      )
      #expect(try await checker.check(.init()).status == .serving)
      await expectStatus(.notFound, mentioning: "nope") {
        _ = try await checker.check(.with { $0.service = "nope" })
      }
    }
  }

  @Test("Watch sends the current status, then each change")
  func watch() async throws {
    let health = HealthService(services: ["roster.v1.Directory"])
    try await withInProcessClient(services: [health]) { client async throws in
      let checker = Grpc_Health_V1_Health.Client(wrapping: client)
      let seen = try await checker.watch(.init()) { response in
        var statuses: [Grpc_Health_V1_HealthCheckResponse.ServingStatus] = []
        for try await message in response.messages {
          statuses.append(message.status)
          if statuses.count == 1 { health.setAllServing(false) }
          if statuses.count == 2 { break }
        }
        return statuses
      }
      #expect(seen == [.serving, .notServing])
      let unknown = try await checker.watch(.with { $0.service = "nope" }) { response in
        for try await message in response.messages { return message.status }
        return .unknown
      }
      #expect(unknown == .serviceUnknown)
      // What the server does when graceful shutdown starts; without it the open Watch
      // handlers would hold shutdown forever.
      health.shutDown()
    }
  }
}
