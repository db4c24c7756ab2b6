public import RosterServices
public import RosterStore

/// Everything `buildServer(config:)` needs: where to listen and which database to serve.
public struct ServerConfig: Sendable {
  /// Address to bind: an IPv4 or IPv6 literal, or `localhost`.
  public var host: String = "127.0.0.1"
  /// Port to bind; 0 picks a free one.
  public var port: Int = 50051
  /// The API tokens and their roles; nil serves every call unauthenticated, which
  /// `roster serve` allows only on loopback or with `--insecure`.
  public var tokens: TokenTable? = nil
  /// Whether to log one line per RPC (method, status, duration, peer, author).
  public var logRequests: Bool = true
  /// The database and its tuning.
  public var store: StoreConfiguration
  /// Demo employees to create when the database file does not exist yet; 0 for none.
  public var seedEmployees: Int = 1000
  /// Whether the demo employees get pictures from `DemoPictures`' pool.
  public var seedPictures: Bool = true
  /// Mean demo sales per demo employee (see `DemoSales`); 0 for none.
  public var seedSalesPerEmployee: Int = 20
  /// How often the WAL is checkpointed in the background, when something was written.
  public var checkpointInterval: Duration = .milliseconds(500)
  /// How often the change log is pruned to its retention policy.
  public var pruneInterval: Duration = .seconds(60)

  /// Creates a configuration for the database at `databasePath`.
  public init(databasePath: String = "data/roster.sqlite") {
    self.store = StoreConfiguration(path: databasePath)
  }
}
