public import Foundation
public import Logging
public import PostgresNIO
public import RosterPostgres

/// The throwaway server `scripts/postgres run` starts, and a store in a schema of its own
/// for each test, dropped afterwards.
public enum PostgresTesting {
  /// The server's URL; nil when the tests run without `scripts/postgres run`.
  public static let url = ProcessInfo.processInfo.environment["ROSTER_TEST_POSTGRES_URL"]

  /// Whether these tests run: with a server, or whenever `scripts/test` runs them (which
  /// sets ROSTER_REQUIRE_POSTGRES, so a missing server fails instead of skipping).
  public static let enabled =
    url != nil || ProcessInfo.processInfo.environment["ROSTER_REQUIRE_POSTGRES"] != nil

  public static let logger: Logger = {
    var logger = Logger(label: "roster.test.postgres")
    logger.logLevel = .warning
    return logger
  }()

  /// Where the tests' stores stage uploads: a directory of this test process, removed when it
  /// exits. A store that is opened and never run (`run()` removes its own) left an empty
  /// directory in the system's `roster-uploads` at each test run before.
  public static let scratchDirectory: String = {
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("roster-test-uploads-\(ProcessInfo.processInfo.processIdentifier)")
      .path
    atexit { try? FileManager.default.removeItem(atPath: PostgresTesting.scratchDirectory) }
    return path
  }()

  /// A configuration for a new, empty schema.
  public static func configuration(
    schema: String = "t_" + UUID().uuidString.prefix(8).lowercased()
  ) throws -> PostgresConfiguration {
    guard let url else {
      throw TestFailure(
        "ROSTER_TEST_POSTGRES_URL is not set: run the tests under scripts/postgres run -- swift test"
      )
    }
    var configuration = PostgresConfiguration(url: try PostgresURL(url))
    configuration.schema = schema
    configuration.maintenanceInterval = .seconds(3600)
    // Many stores at once in the parallel test run: a few connections each.
    configuration.maximumConnections = 4
    configuration.scratchDirectory = Self.scratchDirectory
    // The tests' server is there for the whole run, but the machine may be starved for
    // seconds (a CI run saw a store take it for lost, and a call fail with `unavailable`).
    // A test that loses the host on purpose refuses its logins, which fails the watchdog's
    // connection at once (`HostTests.hostLostWhileIdle`).
    configuration.hostAnswerLimit = .seconds(60)
    return configuration
  }

  /// Opens a store on a new schema, runs it as a service while `body` runs, then stops it and
  /// drops the schema.
  public static func withStore<T>(
    _ configuration: PostgresConfiguration? = nil,
    _ body: (PostgresStore) async throws -> T
  ) async throws -> T {
    let configuration = try configuration ?? Self.configuration()
    do {
      let store = try await PostgresStore.open(configuration, logger: Self.logger)
      let value = try await Self.running(store, body)
      try await Self.dropSchema(configuration)
      return value
    } catch {
      try? await Self.dropSchema(configuration)
      // PSQLError's description says nothing; its reflection says what the server said.
      throw TestFailure(String(reflecting: error))
    }
  }

  /// Runs `store` as a service while `body` runs.
  public static func running<T>(
    _ store: PostgresStore,
    _ body: (PostgresStore) async throws -> T,
    caller: String = #function
  ) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await store.run() }
      // A test that hangs says where, instead of only running out CI's time.
      group.addTask {
        try await Task.sleep(for: .seconds(180))
        FileHandle.standardError.write(
          Data("PostgresTesting: \(caller) still running after 180 s\n".utf8)
        )
      }
      do {
        let value = try await body(store)
        group.cancelAll()
        return value
      } catch {
        group.cancelAll()
        throw error
      }
    }
  }

  /// A connection of its own to the test's schema (for checks the store does not offer).
  /// Bounded: a lock the test cannot get fails it instead of hanging it.
  public static func connect(
    _ configuration: PostgresConfiguration
  ) async throws -> PostgresConnection {
    var connection = PostgresConnection.Configuration(
      host: configuration.url.host,
      port: configuration.url.port,
      username: configuration.url.username,
      password: configuration.url.password,
      database: configuration.url.database,
      tls: .disable
    )
    connection.options.additionalStartupParameters = [
      ("search_path", "\(configuration.schema), public"), ("lock_timeout", "20000"),
      ("statement_timeout", "120000"),
    ]
    return try await PostgresConnection.connect(
      configuration: connection,
      id: 1,
      logger: Self.logger
    )
  }

  /// Runs one query on a connection of its own, then closes it.
  public static func query(
    _ configuration: PostgresConfiguration,
    _ query: PostgresQuery
  ) async throws -> [PostgresRow] {
    let opened = try await Self.connect(configuration)
    do {
      let rows = try await opened.query(query, logger: Self.logger).collect()
      try await opened.close()
      return rows
    } catch {
      try? await opened.close()
      throw error
    }
  }

  /// Runs one statement on a connection of its own.
  public static func query(
    _ configuration: PostgresConfiguration,
    _ sql: String
  ) async throws -> [PostgresRow] {
    try await Self.query(configuration, PostgresQuery(unsafeSQL: sql))
  }

  public static func dropSchema(_ configuration: PostgresConfiguration) async throws {
    _ = try await Self.query(configuration, "DROP SCHEMA IF EXISTS \(configuration.schema) CASCADE")
  }
}

public struct TestFailure: Error, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}
