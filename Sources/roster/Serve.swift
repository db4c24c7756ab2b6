import ArgumentParser
import Foundation
import Logging
import Metrics
import OTel
import Prometheus
import RosterDomain
import RosterPostgres
import RosterProtocols
import RosterSQLite
import RosterServer
import RosterServices
import RosterStore
import ServiceLifecycle
import Tracing

/// `roster serve`: runs the gRPC server on the embedded database.
struct Serve: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Serve the directory over gRPC (seeding demo data on first start)."
  )

  /// Every flag's default comes from here: the configuration types hold the defaults, and
  /// `ConfigurationDefaultsTests` checks the flags and docs/operations.md against them.
  static let defaults = ServerConfig()

  @Option(help: "Address to bind (env ROSTER_HOST).")
  var host: String = ProcessInfo.processInfo.environment["ROSTER_HOST"] ?? Self.defaults.host

  @Option(help: "Port to bind; 0 picks a free one (env ROSTER_PORT).")
  var port: Int =
    Int(ProcessInfo.processInfo.environment["ROSTER_PORT"] ?? "") ?? Self.defaults.port

  @Option(
    help: "Tokens file: ROLE SHA256-HEX [LABEL] per line, from `roster token` (env ROSTER_TOKENS)."
  )
  var tokens: String? = ProcessInfo.processInfo.environment["ROSTER_TOKENS"]

  @OptionGroup(title: "Sign-in with an OpenID Connect provider")
  var signIn: SignInOptions

  @Flag(
    help:
      "Serve a non-loopback address without a tokens file: anyone who can reach it may do anything."
  )
  var insecure = false

  @Option(help: "PEM certificate chain: serve TLS (with --tls-key).")
  var tlsCert: String?

  @Option(help: "PEM private key of the --tls-cert leaf.")
  var tlsKey: String?

  @Option(help: "PEM CA certificates: require client certificates signed by them (mTLS).")
  var tlsClientCa: String?

  @Option(help: "The largest request message accepted, in KiB.")
  var maxRequestKib: Int = Self.defaults.limits.maxRequestBytes / 1024

  @Option(help: "Concurrent streams per HTTP/2 connection.")
  var maxConcurrentStreams: Int = Self.defaults.limits.maxConcurrentStreams

  @Option(help: "Seconds of quiet before the server pings a connection.")
  var keepaliveS: Int = Self.defaults.limits.keepaliveInterval.wholeSeconds

  @Option(help: "Seconds to wait for a keepalive ping's answer before closing.")
  var keepaliveTimeoutS: Int = Self.defaults.limits.keepaliveTimeout.wholeSeconds

  @Option(help: "Close a connection with no calls after this many seconds; 0 never.")
  var maxIdleS: Int = Self.defaults.limits.maxConnectionIdle?.wholeSeconds ?? 0

  @Option(help: "Ask a connection to reconnect after this many seconds; 0 never.")
  var maxAgeS: Int = Self.defaults.limits.maxConnectionAge?.wholeSeconds ?? 0

  @Option(help: "Deadline in ms for unary calls that bring none (streams exempt); 0 for none.")
  var defaultDeadlineMs: Int = Self.defaults.limits.defaultDeadline?.wholeMilliseconds ?? 0

  @Option(help: "Seconds in-flight calls may run after SIGTERM before they are cancelled.")
  var shutdownGraceS: Int = Self.defaults.shutdownGrace.wholeSeconds

  @Option(
    help:
      "Open StreamEmployees and WatchChanges streams per client (per token holder with --tokens, else per peer address)."
  )
  var maxStreamsPerClient: Int = Self.defaults.limits.maxStreamsPerClient

  @Option(
    help:
      "Calls per second each caller may make (per token holder with tokens, else per peer address); 0 for no limit."
  )
  var callerRate: Int = Int(Self.defaults.limits.callerRate?.perSecond ?? 0)

  @Option(
    help:
      "Calls a caller may make at once after a quiet spell; 0 for a tenth of --caller-rate (at least 10)."
  )
  var callerBurst: Int = 0

  @Option(help: "ROLE=RATE: the calls per second each caller of ROLE may make (repeat it).")
  var callerRateFor: [String] = []

  @Option(
    help:
      "A browser origin (https://HOST[:PORT]) whose pages may call the Connect protocol (CORS); repeat for more, or '*' for any (never with credentials). None by default."
  )
  var corsOrigin: [String] = []

  @Flag(
    inversion: .prefixedNo,
    help: "Serve the web console at / (the directory in a browser, over the Connect protocol)."
  )
  var console = Self.defaults.console

  @Option(
    help: "Serve Prometheus metrics at http://HOST:PORT/metrics on this port; off when unset."
  )
  var metricsPort: Int?

  @Option(
    help:
      "Export a span per RPC, with the store's work as child spans, to this OpenTelemetry collector over OTLP/gRPC, e.g. http://127.0.0.1:4317 (env OTEL_EXPORTER_OTLP_ENDPOINT; off by default)."
  )
  var otlpEndpoint: String?

  @Flag(
    inversion: .prefixedNo,
    help: "Log one line per RPC: method, status, duration, peer, author."
  )
  var logRequests = Self.defaults.logRequests

  @Option(
    help:
      "Event-loop threads (default: the CPUs this process may run on, its affinity mask included)."
  )
  var eventLoops: Int?

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? Self.defaults.store.path

  @Option(
    help:
      "Serve this PostgreSQL database instead of the SQLite file, for several replicas over one database: postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]...]/DATABASE[?target_session_attrs=read-write] (env ROSTER_POSTGRES_URL)."
  )
  var postgres: String? = ProcessInfo.processInfo.environment["ROSTER_POSTGRES_URL"]

  @Option(
    name: .customLong("postgres-read"),
    help:
      "A hot standby of the --postgres database that serves reads (pages, search, counts, analytics, streams, pictures), as a postgres:// URL; repeat for several. Reads go to them in turn, to the primary when none answers (env ROSTER_POSTGRES_READ_URLS, separated by spaces)."
  )
  var postgresRead: [String] =
    ProcessInfo.processInfo.environment["ROSTER_POSTGRES_READ_URLS"]?.split(separator: " ").map(
      String.init
    ) ?? []

  @Option(
    help:
      "The furthest behind the primary, in seconds, a --postgres-read standby may be and still serve reads; 0 for no limit."
  )
  var postgresReadMaxLag: Int = 30

  @Option(help: "The PostgreSQL schema holding Roster's tables (with --postgres).")
  var postgresSchema: String = "roster"

  @Option(help: "Connections to PostgreSQL, at most (with --postgres).")
  var postgresConnections: Int = PostgresConfiguration.defaultMaximumConnections

  @Option(
    help:
      "GetEmployee statements in flight at once (with --postgres); the reads that arrive meanwhile share the next one. More suit a database with cores to spare and a longer round trip."
  )
  var postgresPointReads: Int = PostgresConfiguration.defaultPointReads

  @Option(help: "Demo employees to create when the database is new; 0 for an empty directory.")
  var seedEmployees: Int = Self.defaults.seedEmployees

  @Flag(inversion: .prefixedNo, help: "Give the demo employees pictures.")
  var seedPictures = Self.defaults.seedPictures

  @Option(
    help:
      "A directory that keeps the demo picture pool between seedings: made there once, then reused (default: a scratch directory, removed after seeding)."
  )
  var demoPictures: String?

  @Option(help: "Mean demo sales per demo employee; 0 for none.")
  var seedSalesPerEmployee: Int = Self.defaults.seedSalesPerEmployee

  @Option(help: "The largest picture accepted, in MiB.")
  var maxPictureMb: Int = Int(Self.defaults.store.pictures.maximumBytes / 1024 / 1024)

  @Option(help: "Memory for hot pictures, in MiB.")
  var pictureCacheMb: Int = Self.defaults.store.pictures.cacheBytes / 1024 / 1024

  @Option(help: "Pictures up to this many KiB are stored in the database, larger ones as files.")
  var inlinePictureMaxKib: Int = Self.defaults.store.pictures.inlineMaximumBytes / 1024

  @Option(help: "Page cache per connection, in KiB.")
  var cacheSizeKib: Int = Self.defaults.store.cacheSizeKiB

  @Option(help: "Bytes of the database to memory-map.")
  var mmapSize: Int = Self.defaults.store.mmapSize

  @Flag(help: "Log every SQL statement with its duration.")
  var sqlDebug = Self.defaults.store.sqlDebug

  @Option(
    help: "PRAGMA synchronous: full (survives power loss), normal or off.",
    transform: { text in
      guard let value = StoreConfiguration.Synchronous(rawValue: text.lowercased()) else {
        throw ValidationError("--synchronous must be full, normal or off")
      }
      return value
    }
  )
  var synchronous: StoreConfiguration.Synchronous = Self.defaults.store.synchronous

  @Option(help: "The most writes that share one transaction (1: each write commits alone).")
  var maxWriteBatch: Int = Self.defaults.store.writer.maximumBatch

  @Option(help: "Rows per transaction of a bulk upsert (UpsertEmployees).")
  var bulkChunkRows: Int = Self.defaults.store.writer.bulkChunkRows

  @Option(
    help:
      "Nice value of bulk work (upsert and import chunks, and decoding their rows): 0 to 19; 19 is Linux's background class (SCHED_IDLE)."
  )
  var bulkNiceness: Int32 = Self.defaults.store.writer.bulkNiceness

  @Option(
    help:
      "Heavy store calls (searches, counts, aggregates, calendars) run at once: on SQLite on threads of their own at a lower priority, on PostgreSQL each on a connection of its own."
  )
  var heavyConcurrency: Int = Self.defaults.store.heavyLane.width

  @Option(
    help: "Heavy store calls that may wait for a thread; past that, RESOURCE_EXHAUSTED at once."
  )
  var heavyQueue: Int = Self.defaults.store.heavyLane.queueLimit

  @Option(help: "Interactive store reads (pages, change-log reads) run at once.")
  var interactiveConcurrency: Int = Self.defaults.store.interactiveLane.width

  @Option(help: "Interactive store reads that may wait for a thread.")
  var interactiveQueue: Int = Self.defaults.store.interactiveLane.queueLimit

  @Option(
    help:
      "The longest one heavy query may run, in seconds, whatever the call's deadline; 0 for no limit."
  )
  var maxQuerySeconds: Double =
    Double(Self.defaults.store.heavyLane.budget?.wholeMilliseconds ?? 0) / 1000

  @Option(
    help:
      "The most sales one page of AggregateSales medians by year, month or day reads (it then ends early, at a group boundary); 0 for no limit."
  )
  var medianRowsPerPage: Int64 = Self.defaults.store.medianRowsPerPage

  @Option(
    help:
      "Read-only connections for one-SELECT reads (GetEmployee and the other point reads), beside the reader pool and opened on first use; 0 reads them through the pool."
  )
  var pointConnections: Int = Self.defaults.store.pointReaderCount

  @Option(
    help:
      "Memory budget in MiB shared by SQLite's heap (soft limit), every connection's page cache and the picture cache; 0 for none (each cache keeps its own flag)."
  )
  var memoryBudgetMb: Int = Self.defaults.store.memory.megabytes ?? 0

  @Option(help: "Hours of history the change log keeps.")
  var changeLogMaxAgeHours: Int =
    Self.defaults.store.changeLogRetention.maximumAge.wholeSeconds / 3600

  @Option(help: "The most changes the change log keeps.")
  var changeLogMaxRows: Int = Self.defaults.store.changeLogRetention.maximumRows

  /// Whether `host` only accepts connections from this machine.
  static func isLoopback(_ host: String) -> Bool { ServerConfig.isLoopback(host) }

  func validate() throws {
    if self.tokens == nil && self.signIn.issuer == nil && !self.insecure
      && !Self.isLoopback(self.host)
    {
      throw ValidationError(
        "refusing to serve \(self.host) without --tokens FILE (make tokens with `roster token --role ROLE`) or --oidc-issuer; "
          + "pass --insecure to serve it to anyone who can reach it"
      )
    }
    if (self.tlsCert == nil) != (self.tlsKey == nil) {
      throw ValidationError("--tls-cert and --tls-key go together")
    }
    if self.tlsClientCa != nil && self.tlsCert == nil {
      throw ValidationError("--tls-client-ca needs --tls-cert and --tls-key")
    }
    guard self.maxRequestKib >= 1, self.maxConcurrentStreams >= 1, self.keepaliveS >= 1,
      self.keepaliveTimeoutS >= 1, self.maxIdleS >= 0, self.maxAgeS >= 0,
      self.defaultDeadlineMs >= 0, self.maxStreamsPerClient >= 1, self.shutdownGraceS >= 0
    else {
      throw ValidationError(
        "limits must be positive (--max-idle-s, --max-age-s and --default-deadline-ms may be 0 for none)"
      )
    }
    if let problem = CORSPolicy.check(self.corsOrigin) {
      throw ValidationError(problem)
    }
    if let eventLoops = self.eventLoops, !(1 ... 1024).contains(eventLoops) {
      throw ValidationError("--event-loops must be between 1 and 1024")
    }
    if let metricsPort = self.metricsPort, !(0 ... 65535).contains(metricsPort) {
      throw ValidationError("--metrics-port must be between 0 and 65535")
    }
    guard (0 ... 65535).contains(self.port) else {
      throw ValidationError("--port must be between 0 and 65535")
    }
    guard self.seedEmployees >= 0, self.seedSalesPerEmployee >= 0 else {
      throw ValidationError("--seed-employees and --seed-sales-per-employee must not be negative")
    }
    guard self.bulkChunkRows >= 1 else {
      throw ValidationError("--bulk-chunk-rows must be at least 1")
    }
    guard (0 ... 19).contains(self.bulkNiceness) else {
      throw ValidationError("--bulk-niceness must be 0 to 19")
    }
    guard self.postgresConnections >= 1,
      (1 ... self.postgresConnections).contains(self.postgresPointReads)
    else {
      throw ValidationError(
        "--postgres-connections must be at least 1, and --postgres-point-reads 1 to that"
      )
    }
    guard self.postgresReadMaxLag >= 0 else {
      throw ValidationError("--postgres-read-max-lag must not be negative")
    }
    guard self.postgresRead.isEmpty || self.postgres != nil else {
      throw ValidationError("--postgres-read needs --postgres: the standbys of that database")
    }
    guard self.maxWriteBatch >= 1 else {
      throw ValidationError("--max-write-batch must be at least 1")
    }
    guard self.maxPictureMb >= 1, self.pictureCacheMb >= 0, self.inlinePictureMaxKib >= 0 else {
      throw ValidationError(
        "--max-picture-mb must be positive; --picture-cache-mb and --inline-picture-max-kib not negative"
      )
    }
    guard self.heavyConcurrency >= 1, self.interactiveConcurrency >= 1, self.heavyQueue >= 0,
      self.interactiveQueue >= 0
    else {
      throw ValidationError(
        "--heavy-concurrency and --interactive-concurrency must be at least 1; the queues not negative"
      )
    }
    guard (0 ... 64).contains(self.pointConnections) else {
      throw ValidationError("--point-connections must be 0 to 64")
    }
    guard self.maxQuerySeconds >= 0, self.memoryBudgetMb >= 0, self.medianRowsPerPage >= 0 else {
      throw ValidationError(
        "--max-query-seconds, --memory-budget-mb and --median-rows-per-page must not be negative"
      )
    }
    guard self.callerRate >= 0, self.callerBurst >= 0 else {
      throw ValidationError("--caller-rate and --caller-burst must not be negative")
    }
    _ = try self.callerRates()
    guard self.changeLogMaxAgeHours >= 1, self.changeLogMaxRows >= 1 else {
      throw ValidationError("--change-log-max-age-hours and --change-log-max-rows must be positive")
    }
  }
}
