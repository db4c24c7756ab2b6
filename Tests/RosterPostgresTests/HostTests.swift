import Foundation
import PostgresNIO
import RosterDomain
import TestSupport
import Testing

@testable import RosterPostgres

/// Several hosts in one address: the host that suits is found in order (`HostFinder`), and a
/// suspected host makes calls fail at once until it or another is found (`HostPool`).
@Suite("PostgreSQL hosts", .timeLimit(.minutes(10)), .enabled(if: PostgresTesting.enabled))
struct HostTests {
  /// A loopback port nothing listens on.
  static func closedPort() throws -> Int {
    let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
      }
    }
    try #require(bound)
    return Int(UInt16(bigEndian: address.sin_port))
  }

  /// The test server's configuration, its address naming `hosts` (the server's own where nil)
  /// with `parameters`.
  static func configuration(
    hosts: [Int?],
    parameters: String = "",
    user: String? = nil
  ) throws -> PostgresConfiguration {
    var configuration = try PostgresTesting.configuration()
    let server = configuration.url.hosts[0]
    let list = hosts.map { "127.0.0.1:\($0 ?? server.port)" }.joined(separator: ",")
    configuration.url = try PostgresURL(
      "postgres://\(user ?? configuration.url.username)@\(list)/\(configuration.url.database)"
        + (parameters.isEmpty ? "" : "?" + parameters)
    )
    return configuration
  }

  @Test("a host that refuses connections is skipped for the next")
  func skipsARefusingHost() async throws {
    let configuration = try Self.configuration(hosts: [try Self.closedPort(), nil])
    let (connection, endpoint) = try await HostFinder(
      configuration: configuration,
      logger: PostgresTesting.logger
    ).connect(attempts: 1)
    try await connection.close()
    #expect(endpoint == configuration.url.hosts[1])
  }

  @Test("read-write passes over a server that takes only read-only transactions; any takes it")
  func readWriteSkipsReadOnly() async throws {
    let admin = try PostgresTesting.configuration()
    let role = "ro_\(admin.schema)"
    _ = try await PostgresTesting.query(admin, "CREATE ROLE \(role) LOGIN")
    _ = try await PostgresTesting.query(
      admin,
      "ALTER ROLE \(role) SET default_transaction_read_only = on"
    )
    let readOnly = try Self.configuration(
      hosts: [nil, try Self.closedPort()],
      parameters: "target_session_attrs=read-write",
      user: role
    )
    await #expect {
      // Closed if it was taken after all: postgres-nio stops the process on one left open.
      try await HostFinder(configuration: readOnly, logger: PostgresTesting.logger)
        .connect(attempts: 1).connection.close()
    } throws: { error in
      (error as? StoreError)?.code == .unavailable
        && (error as? StoreError)?.message.contains("no database host is a primary") == true
    }
    let any = try Self.configuration(hosts: [nil], user: role)
    let (connection, _) = try await HostFinder(configuration: any, logger: PostgresTesting.logger)
      .connect(attempts: 1)
    try await connection.close()
    _ = try await PostgresTesting.query(admin, "DROP ROLE \(role)")
  }

  @Test("a suspected host fails calls at once; once found again, they go through")
  func suspectedHostFailsAtOnce() async throws {
    let configuration = try Self.configuration(hosts: [nil])
    let pool = try HostPool(
      configuration: configuration,
      endpoint: configuration.url.hosts[0],
      logger: PostgresTesting.logger
    )
    // Suspected before the pool runs: nothing can find the host yet.
    pool.suspect(because: StoreError(.unavailable, "test"))
    await #expect {
      try await pool.withConnection { connection in
        try await connection.query("SELECT 1", logger: PostgresTesting.logger).collect().count
      }
    } throws: { error in
      (error as? StoreError)?.message == HostPool.lookingForHost.message
    }
    let running = Task { await pool.run() }
    let answered = try await eventually {
      let rows = try? await pool.withConnection { connection in
        try await connection.query("SELECT 1", logger: PostgresTesting.logger).collect().count
      }
      return rows == 1
    }
    running.cancel()
    await running.value
    #expect(answered)
  }

  @Test(
    "calls waiting on a pool whose host went while its connections sat idle end unavailable, not at their deadline"
  )
  func hostLostWhileIdle() async throws {
    let admin = try PostgresTesting.configuration()
    // A role of this test's own: cutting and refusing its logins touches no other test.
    let role = "idle_\(admin.schema)"
    _ = try await PostgresTesting.query(admin, "CREATE ROLE \(role) LOGIN")
    let configuration = try Self.configuration(hosts: [nil], user: role)
    let pool = try HostPool(
      configuration: configuration,
      endpoint: configuration.url.hosts[0],
      logger: PostgresTesting.logger
    )
    let running = Task { await pool.run() }
    @Sendable func selectOne() async throws -> Int {
      try await pool.withConnection { connection in
        try await connection.query("SELECT 1", logger: PostgresTesting.logger).collect().count
      }
    }
    let first = try await selectOne()
    // The host "goes" while the pool's one connection is idle: cut, and new logins refused.
    // postgres-nio's pool then queues calls while it tries to connect, for up to a minute
    // (its circuit breaker).
    _ = try await PostgresTesting.query(admin, "ALTER ROLE \(role) NOLOGIN")
    _ = try await PostgresTesting.query(
      admin,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)'"
    )
    _ = try await eventually { try await PoolTests.backends(role, admin) == 0 }
    // A client's deadline, well short of the circuit breaker's minute.
    let call = Task { try await selectOne() }
    let deadline = Task {
      try await Task.sleep(for: .seconds(20))
      call.cancel()
    }
    let outcome = await call.result
    deadline.cancel()
    running.cancel()
    await running.value
    try await PoolTests.drop(role, admin)
    #expect(first == 1)
    #expect(!pool.serving, "the host is suspected")
    switch outcome {
    case .success: Issue.record("a call went through on a host that refuses logins")
    case .failure(let error):
      #expect(
        (PostgresStore.mapped(error) as? StoreError)?.code == .unavailable,
        "\(String(reflecting: error))"
      )
    }
  }
}
