public import Logging

extension PostgresStore {
  /// Opens the PostgreSQL store for a command that works offline (`roster import`, `roster
  /// copy`, the benchmarks' measurements) and runs its pool and writer beside `body`,
  /// stopping them when `body` returns or throws.
  public static func withOffline(
    _ configuration: PostgresConfiguration,
    label: String,
    _ body: (PostgresStore) async throws -> Void
  ) async throws {
    var logger = Logger(label: label)
    // Errors only: PostgresNIO warns of a lease asked for before the pool's task has begun,
    // which the pool then serves.
    logger.logLevel = .error
    let store = try await PostgresStore.open(configuration, logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await store.run() }
      defer { group.cancelAll() }
      try await body(store)
    }
  }
}
