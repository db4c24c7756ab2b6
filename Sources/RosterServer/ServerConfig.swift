internal import RosterDomain
public import RosterPostgres
public import RosterProtocols
public import RosterSQLite
internal import RosterSeed
public import RosterServices

/// Everything `buildServer(config:)` needs: where to listen and which database to serve.
public struct ServerConfig: Sendable {
  /// Address to bind: an IPv4 or IPv6 literal, or `localhost`.
  public var host: String = "127.0.0.1"
  /// Port to bind; 0 picks a free one.
  public var port: Int = 50051
  /// The API tokens and their roles; nil serves every call unauthenticated, which
  /// `roster serve` allows only on loopback or with `--insecure`.
  public var tokens: TokenTable? = nil
  /// Sign-in with the company's OpenID Connect provider, beside or instead of `tokens`; the
  /// server keeps the provider's keys current (`OIDCKeyRefresher`).
  public var signIn: SignIn? = nil
  /// TLS for the listening socket; nil serves plaintext.
  public var tls: TLSFiles? = nil
  /// Transport and call limits.
  public var limits = Limits()
  /// Whether to log one line per RPC (method, status, duration, peer, author).
  public var logRequests: Bool = true
  /// Whether each call gets a span (`TracingInterceptor`): on when traces are exported.
  public var tracing: Bool = false
  /// The browser origins that may call the Connect protocol (CORS); none by default.
  public var cors: CORSPolicy? = nil
  /// Whether `GET /` serves the web console (`WebConsole`).
  public var console: Bool = true
  /// The database and its tuning.
  public var store: StoreConfiguration
  /// A PostgreSQL server to serve instead of the SQLite file (`roster serve --postgres`), for
  /// several replicas over one database; nil for SQLite.
  public var postgres: PostgresConfiguration? = nil
  /// Demo employees to create when the database is new (a new SQLite file, or a PostgreSQL
  /// schema this process created); 0 for none.
  public var seedEmployees: Int = 1000
  /// Whether the demo employees get pictures from `DemoPictures`' pool.
  public var seedPictures: Bool = true
  /// A directory that keeps that pool between seedings (made there once, then reused); nil
  /// for a scratch directory beside the database, removed after seeding.
  public var demoPictures: String? = nil
  /// Mean demo sales per demo employee (see `DemoSales`); 0 for none.
  public var seedSalesPerEmployee: Int = 20
  /// How long in-flight calls may run after shutdown starts before they are cancelled.
  public var shutdownGrace: Duration = .seconds(20)

  /// Creates a configuration for the database at `databasePath`.
  public init(databasePath: String = "data/roster.sqlite") {
    self.store = StoreConfiguration(path: databasePath)
  }
}

/// PEM files for TLS.
public struct TLSFiles: Sendable {
  /// The server's certificate chain.
  public var certificatePath: String
  /// The private key of its leaf certificate.
  public var keyPath: String
  /// When set, clients must present a certificate signed by one of these CAs (mTLS).
  public var clientCAPath: String?

  public init(certificatePath: String, keyPath: String, clientCAPath: String? = nil) {
    self.certificatePath = certificatePath
    self.keyPath = keyPath
    self.clientCAPath = clientCAPath
  }
}

/// Transport and call limits. Every one has a `roster serve` flag.
public struct Limits: Sendable {
  /// The largest request message accepted (4 MiB, gRPC's usual default). Responses are
  /// bounded by design: pages are at most 1,000 rows and picture messages 64 KiB.
  public var maxRequestBytes = 4 * 1024 * 1024
  /// Concurrent streams one HTTP/2 connection may open.
  public var maxConcurrentStreams = 256
  /// How often the server pings a connection that has been quiet, and how long it waits for
  /// the answer before closing it.
  public var keepaliveInterval: Duration = .seconds(2 * 60 * 60)
  public var keepaliveTimeout: Duration = .seconds(20)
  /// A connection with no open call for this long is closed (GOAWAY); nil keeps it.
  public var maxConnectionIdle: Duration? = .seconds(30 * 60)
  /// A connection older than this is asked to reconnect (GOAWAY), so load spreads over new
  /// servers; its calls get `maxConnectionGrace` to finish. nil keeps it.
  public var maxConnectionAge: Duration? = nil
  public var maxConnectionGrace: Duration? = .seconds(30)
  /// The deadline of a call whose client sets none; nil for none. `WatchChanges` and health
  /// `Watch` are exempt: they are meant to stay open.
  public var defaultDeadline: Duration? = .seconds(60)
  /// Open `StreamEmployees` and `WatchChanges` streams allowed per client address.
  public var maxStreamsPerClient = 32
  /// The calls per second each caller may make (`CallerRateInterceptor`); nil for no limit.
  public var callerRate: CallerRate? = nil
  /// The calls per second each caller of a role may make, in place of `callerRate`.
  public var callerRates: [Role: CallerRate] = [:]

  public init() {}
}

extension ServerConfig {
  /// Whether `host` names this machine only: what `roster serve` may bind without tokens, and
  /// where a provider may be reached over plain HTTP (a test provider).
  public static func isLoopback(_ host: String) -> Bool {
    host == "localhost" || host == "::1" || host.hasPrefix("127.")
  }
}
