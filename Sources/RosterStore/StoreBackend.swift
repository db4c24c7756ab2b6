public import ServiceLifecycle

/// A whole backend, as the composition root holds it: every protocol the services use, plus
/// what the process around them needs.
///
/// It is a `Service`: `run()` does the backend's background work (for SQLite: WAL
/// checkpoints, change-log pruning, the picture sweep, the memory gauges) until graceful
/// shutdown, then makes what was committed durable and stops. Put it in a `ServiceGroup`
/// **before** the gRPC server: a group shuts services down in reverse order, so the store
/// stops only after the server's last call has answered.
///
/// ```swift
/// let group = ServiceGroup(configuration: .init(services: [.init(service: store), .init(service: grpc)], logger: logger))
/// ```
public protocol StoreBackend: Service, DirectoryStore, ChangeFeedStore, AnalyticsStore, PictureStore
{
  /// Ends every `waitForChanges`, now and later, with `unavailable`: the first step of a
  /// server's shutdown, since change-feed watchers never end by themselves.
  func closeChangeFeed()

  /// Runs `body`, an offline load (`roster import`, `roster copy`, first-start seeding), the
  /// fastest way the backend knows, and leaves what it wrote ready to be read: SQLite drops
  /// and rebuilds the employees' indexes around a load into an empty store (into a store with
  /// rows, `body` runs as is); PostgreSQL folds the counters and vacuums and analyzes after.
  /// A load into an empty directory logs no change per row: its end logs it as one gap, the
  /// change log reading as pruned through the next number (a token from before it is
  /// `outOfRange`).
  func withBulkLoad<T>(_ body: () async throws -> T) async throws -> T
}
