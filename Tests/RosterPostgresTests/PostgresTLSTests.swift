import Foundation
import PostgresNIO
import RosterDomain
import TestSupport
import Testing

@testable import RosterPostgres

/// TLS to PostgreSQL, as libpq's `sslmode` and `sslrootcert` ask for it, against the
/// throwaway cluster `scripts/postgres` starts with a certificate signed by a CA of its own
/// (`ROSTER_TEST_POSTGRES_CA`).
@Suite("PostgreSQL TLS", .enabled(if: PostgresTesting.enabled), .timeLimit(.minutes(10)))
struct PostgresTLSTests {
  static var caFile: String {
    get throws {
      guard let file = ProcessInfo.processInfo.environment["ROSTER_TEST_POSTGRES_CA"] else {
        throw TestFailure(
          "ROSTER_TEST_POSTGRES_CA is not set: run the tests under scripts/postgres run"
        )
      }
      return file
    }
  }

  /// The test server's URL with `parameters` added.
  static func url(_ parameters: String) throws -> PostgresURL {
    guard let base = PostgresTesting.url else {
      throw TestFailure("ROSTER_TEST_POSTGRES_URL is not set")
    }
    return try PostgresURL(base + "?" + parameters)
  }

  /// Whether the migrator's own connection, opened with `url`, runs over TLS (the server's
  /// `pg_stat_ssl` says).
  static func connectsWithTLS(_ url: PostgresURL) async throws -> Bool {
    var configuration = try PostgresTesting.configuration()
    configuration.url = url
    let connection = try await Migrator(
      configuration: configuration,
      logger: PostgresTesting.logger
    ).connect()
    defer { Task { try? await connection.close() } }
    let rows = try await connection.query(
      "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
      logger: PostgresTesting.logger
    ).collect()
    return try rows.first?.decode(Bool.self) ?? false
  }

  @Test(
    "sslmode=require connects over TLS; disable connects in plaintext; prefer is the default and uses TLS"
  )
  func requireAndDisable() async throws {
    #expect(try await Self.connectsWithTLS(Self.url("sslmode=require")))
    #expect(try await Self.connectsWithTLS(Self.url("sslmode=disable")) == false)
    let plain = try PostgresURL(PostgresTesting.url ?? "")
    #expect(plain.sslMode == .prefer)
    #expect(try await Self.connectsWithTLS(plain))
  }

  @Test("sslmode=verify-full with the cluster's CA connects, and a store opens and serves over it")
  func verifyFull() async throws {
    let url = try Self.url("sslmode=verify-full&sslrootcert=\(try Self.caFile)")
    #expect(try await Self.connectsWithTLS(url))
    var configuration = try PostgresTesting.configuration()
    configuration.url = url
    try await PostgresTesting.withStore(configuration) { store in
      _ = try await store.departmentCounts()
    }
  }

  @Test(
    "sslmode=verify-full with a CA that did not sign the server's certificate fails at start, saying why"
  )
  func wrongCA() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "roster-tls-\(UUID().uuidString)"
    )
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let other = directory.appendingPathComponent("other-ca.crt").path
    let status = try await RosterProcess.offPool {
      let openssl = Process()
      openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
      openssl.arguments = [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=another CA",
        "-keyout", directory.appendingPathComponent("other-ca.key").path, "-out", other,
      ]
      openssl.standardError = FileHandle.nullDevice
      try openssl.run()
      openssl.waitUntilExit()
      return openssl.terminationStatus
    }
    try #require(status == 0)
    var configuration = try PostgresTesting.configuration()
    configuration.url = try Self.url("sslmode=verify-full&sslrootcert=\(other)")
    let error = await #expect(throws: StoreError.self) {
      _ = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    }
    #expect(error?.code == .unavailable)
    #expect(error?.message.contains("sslmode=verify-full") == true, "\(String(describing: error))")
    #expect(error?.message.contains("TLS handshake failed") == true, "\(String(describing: error))")
  }

  @Test(
    "a verify mode without a CA file, an unknown sslmode and an unknown parameter are refused, naming them"
  )
  func badParameters() throws {
    let missing = try Self.url("sslmode=verify-ca&sslrootcert=/nonexistent/ca.crt")
    let error = #expect(throws: StoreError.self) { _ = try missing.tlsChoice() }
    #expect(error?.message.contains("/nonexistent/ca.crt") == true)
    let mode = #expect(throws: StoreError.self) { _ = try Self.url("sslmode=sometimes") }
    #expect(mode?.message.contains("sometimes") == true)
    let unknown = #expect(throws: StoreError.self) { _ = try Self.url("sslcert=client.crt") }
    #expect(unknown?.message.contains("sslcert") == true)
  }
}
