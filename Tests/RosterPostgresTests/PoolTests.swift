import Foundation
import TestSupport
import Testing

@testable import RosterPostgres

/// The pool keeps every connection open, and the store's own keep-alive
/// (`PostgresStore.keepAlive`) reaches each of them while nothing else runs; a connection that
/// dies is replaced and reached in turn.
@Suite("PostgreSQL connection pool", .timeLimit(.minutes(5)), .enabled(if: PostgresTesting.enabled))
struct PoolTests {
  /// The backends whose last statement was the keep-alive.
  static func pinged(_ configuration: PostgresConfiguration) async throws -> Set<Int32> {
    let rows = try await PostgresTesting.query(
      configuration,
      "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT 1 AS roster_keep_alive'"
    )
    return Set(try rows.map { try $0.decode(Int32.self) })
  }

  /// Waits (up to 20 s) until `count` backends other than `excluded` have run the keep-alive.
  static func waitForPings(
    _ count: Int,
    excluding excluded: Set<Int32> = [],
    _ configuration: PostgresConfiguration
  ) async throws -> Set<Int32> {
    var pids: Set<Int32> = []
    for _ in 0 ..< 200 {
      pids = try await Self.pinged(configuration).subtracting(excluded)
      if pids.count >= count { break }
      try await Task.sleep(for: .milliseconds(100))
    }
    return pids
  }

  @Test("every pooled connection stays open and runs the keep-alive; a terminated one is replaced")
  func keepAlive() async throws {
    var configuration = try PostgresTesting.configuration()
    configuration.maximumConnections = 3
    configuration.keepAliveInterval = .milliseconds(200)
    try await PostgresTesting.withStore(configuration) { store in
      let first = try await Self.waitForPings(3, configuration)
      #expect(first.count >= 3, "the keep-alive reached \(first.count) connections of 3")
      // One connection dies (as when PostgreSQL's side goes): the pool opens another, and the
      // keep-alive reaches it too.
      let victim = try #require(first.first)
      _ = try await PostgresTesting.query(configuration, "SELECT pg_terminate_backend(\(victim))")
      let replaced = try await Self.waitForPings(3, excluding: [victim], configuration)
      #expect(
        replaced.count >= 3 && !replaced.contains(victim),
        "after a backend was terminated: \(replaced)"
      )
      // The store still answers.
      _ = try await store.countEmployees(filter: .init())
    }
  }
}
