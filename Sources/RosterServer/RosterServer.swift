internal import Foundation
public import GRPCCore
public import Logging
internal import NIOPosix
internal import RosterDomain
internal import RosterPostgres
internal import RosterProtocols
internal import RosterSQLite
internal import RosterSeed
public import RosterServices
public import RosterStore
internal import RosterTransport
public import ServiceLifecycle

/// The Roster application: the store, the services and the gRPC server, wired once.
///
/// `roster serve`, the end-to-end tests and the benchmarks all build it through
/// `buildServer(config:)`, so there is a single wiring to trust.
///
/// ```swift
/// let app = try await buildServer(config: ServerConfig(databasePath: "data/roster.sqlite"))
/// try await ServiceGroup(services: [app], gracefulShutdownSignals: [.sigterm], logger: logger)
///   .run()
/// ```
public struct RosterServer: Service {
  /// The shared store.
  public let store: any StoreBackend
  /// The health service, to flip statuses from outside.
  public let health: HealthService
  private let server: GRPCServing
  /// Where the server's own tasks run (grpc-swift's per-connection and per-stream work, the
  /// fast path's point calls): the event loops, not the cooperative pool, where the services'
  /// handlers run.
  private let serverExecutor: EventLoopGroupExecutor
  /// Loads the demo directory into a new database that needs the store running first
  /// (PostgreSQL); run before the server takes calls.
  private let seed: (@Sendable () async throws -> Void)?
  /// Work that runs for the server's life beside it (the sign-in keys' refresher): started
  /// first and stopped last, so no call finds it gone.
  private let background: [any Service]
  private let shutdownGrace: Duration
  private let logger: Logger

  init(
    store: any StoreBackend,
    seed: (@Sendable () async throws -> Void)?,
    background: [any Service] = [],
    health: HealthService,
    server: GRPCServing,
    serverExecutor: EventLoopGroupExecutor,
    shutdownGrace: Duration,
    logger: Logger
  ) {
    self.serverExecutor = serverExecutor
    self.shutdownGrace = shutdownGrace
    self.store = store
    self.seed = seed
    self.background = background
    self.health = health
    self.server = server
    self.logger = logger
  }

  /// The bound address as `HOST:PORT`, once the server listens.
  public var listeningAddress: String {
    get async throws {
      try await self.server.listeningAddress()
    }
  }

  /// Runs the store and the server as two services of one group, the store first, until
  /// graceful shutdown, which the group runs in reverse: the server first (health turns
  /// `NOT_SERVING`, change-feed watchers are told to resume elsewhere with `UNAVAILABLE`, no
  /// new calls are taken and in-flight ones finish, for at most `shutdownGrace` before the
  /// rest are cancelled), then the store (`StoreBackend.run`: background work stops, and what
  /// was committed is made durable; for SQLite, a TRUNCATE checkpoint).
  public func run() async throws {
    let serving = Serving(
      server: self.server,
      executor: self.serverExecutor,
      store: self.store,
      seed: self.seed,
      health: self.health,
      shutdownGrace: self.shutdownGrace,
      logger: self.logger
    )
    let group = ServiceGroup(
      configuration: ServiceGroupConfiguration(
        services: self.background.map { .init(service: $0) } + [
          .init(service: self.store),
          .init(service: serving),
        ],
        logger: self.logger
      )
    )
    // A SIGTERM while the server starts stops it before it listens: whoever waits for its
    // address is told so rather than left waiting.
    defer { self.server.stopped() }
    try await group.run()
    self.logger.info("stopped")
  }

  /// The gRPC server as a service of its own, so the group can stop it before the store.
  private struct Serving: Service {
    let server: GRPCServing
    let executor: EventLoopGroupExecutor
    let store: any StoreBackend
    let seed: (@Sendable () async throws -> Void)?
    let health: HealthService
    let shutdownGrace: Duration
    let logger: Logger

    func run() async throws {
      do {
        try await cancelWhenGracefulShutdown { try await self.seed?() }
      } catch is CancellationError where Task.isShuttingDownGracefully {
        self.logger.warning(
          "stopped while seeding the demo directory: the database holds part of it; start on a new one for all of it"
        )
      }
      // A SIGTERM while the seed ran: nothing to serve, and nothing to stop.
      if Task.isShuttingDownGracefully { return }
      try await withGracefulShutdownHandler {
        try await withThrowingTaskGroup(of: Void.self) { serving in
          serving.addTask {
            do {
              try await withTaskExecutorPreference(self.executor) { try await self.server.serve() }
            } catch let error as RuntimeError
              where (error.code == .serverIsStopped || error.code == .transportError)
              && Task.isShuttingDownGracefully
            {
              // Shut down as it began to serve (a SIGTERM just after the seed): stopped before
              // it started, or its listener closed while it bound. A clean stop either way.
            }
          }
          serving.addTask {
            // Only once shutdown has begun: bound how long in-flight calls may take.
            try await gracefulShutdown()
            try await Task.sleep(for: self.shutdownGrace)
            self.logger.warning(
              "calls still running after the shutdown grace period; cancelling them",
              metadata: ["grace": "\(self.shutdownGrace)"]
            )
          }
          // Whichever ends first, the server draining or the grace period, ends serving.
          _ = try await serving.next()
          serving.cancelAll()
        }
      } onGracefulShutdown: {
        self.logger.info("shutting down")
        self.health.shutDown()
        self.store.closeChangeFeed()
        self.server.beginGracefulShutdown()
      }
    }
  }
}

/// The services every Roster server registers, in one place for the real server and tests.
///
/// The interceptors are one `CallChain`, outermost first: the span when `tracing`, the request
/// log (so it also records refused calls), the metrics, authentication when `tokens` or
/// `signIn` is set, the
/// per-client stream cap, the call control (cancellation and deadlines reach the store; the
/// default deadline), then the author. `pacing` keeps streaming handlers from running ahead of the transport: the
/// HTTP/2 server passes its event loops, the in-process transport needs none.
public func buildServices(
  store: any StoreBackend,
  pacing: any ResponsePacing = UnpacedResponses(),
  tokens: TokenTable? = nil,
  signIn: SignIn? = nil,
  logRequests: Bool = false,
  defaultDeadline: Duration? = nil,
  maxStreamsPerClient: Int? = nil,
  callerRates: (CallerRate?, [Role: CallerRate]) = (nil, [:]),
  pausing: (any CallerPausing)? = nil,
  tracing: Bool = false,
  logger: Logger = Logger(label: "roster")
) throws -> (
  services: [any RegistrableRPCService],
  interceptors: [any ServerInterceptor],
  health: HealthService
) {
  let built = try buildServiceSet(
    store: store,
    pacing: pacing,
    tokens: tokens,
    signIn: signIn,
    logRequests: logRequests,
    defaultDeadline: defaultDeadline,
    maxStreamsPerClient: maxStreamsPerClient,
    callerRates: callerRates,
    pausing: pausing,
    tracing: tracing,
    logger: logger
  )
  return (built.services, [built.chain], built.health)
}

/// `buildServices`, plus the unary methods the HTTP/2 server answers on its fast path
/// (`UnaryFastPath`) and the streaming methods the Connect protocol and gRPC-Web call
/// (`ConnectStreams`), bound to the same service instances.
func buildServiceSet(
  store: any StoreBackend,
  pacing: any ResponsePacing,
  tokens: TokenTable?,
  signIn: SignIn?,
  logRequests: Bool,
  defaultDeadline: Duration?,
  maxStreamsPerClient: Int?,
  callerRates: (CallerRate?, [Role: CallerRate]),
  pausing: (any CallerPausing)?,
  tracing: Bool,
  logger: Logger
) throws -> (
  services: [any RegistrableRPCService],
  chain: CallChain,
  health: HealthService,
  fastMethods: [UnaryFastPath.Method],
  streamingMethods: [StreamingMethod]
) {
  let reflection = try ReflectionService()
  let health = HealthService(
    services: reflection.serviceNames.filter { $0 != "grpc.health.v1.Health" }
  )
  let directory = DirectoryService(store: store, logger: logger)
  let pictures = PicturesService(store: store, pacing: pacing, logger: logger)
  let analytics = AnalyticsService(store: store, logger: logger)
  let services: [any RegistrableRPCService] = [
    directory,
    // After `directory`: its StreamEmployees registration replaces the generated one.
    directory.pageStreams,
    pictures,
    analytics,
    health,
    reflection,
    reflection.v1alpha,
  ]
  var interceptors: [any CallInterceptor] = []
  // First, so the span covers every other interceptor's work and the log lines carry its id.
  if tracing { interceptors.append(TracingInterceptor()) }
  if logRequests { interceptors.append(RequestLogInterceptor(logger: logger)) }
  interceptors.append(RequestMetricsInterceptor())
  if tokens != nil || signIn != nil {
    interceptors.append(AuthInterceptor(tokens: tokens, signIn: signIn))
  }
  if callerRates.0 != nil || !callerRates.1.isEmpty {
    interceptors.append(
      CallerRateInterceptor(rate: callerRates.0, byRole: callerRates.1, pausing: pausing)
    )
  }
  if let maxStreamsPerClient {
    interceptors.append(StreamLimitInterceptor(maximumPerClient: maxStreamsPerClient))
  }
  interceptors.append(CallControlInterceptor(deadline: defaultDeadline))
  interceptors.append(AuthorInterceptor())
  let bindings = ServiceBindings(
    directory: directory,
    pictures: pictures,
    analytics: analytics,
    health: health,
    reflection: reflection
  )
  return (services, CallChain(interceptors), health, bindings.unary, bindings.streaming)
}

/// Opens (and on first start, seeds) the store, then builds the server on HTTP/2.
public func buildServer(
  config: ServerConfig,
  logger: Logger = Logger(label: "roster")
) async throws -> RosterServer {
  let (store, seed) = try await openStore(config: config, logger: logger)
  let eventLoops = MultiThreadedEventLoopGroup.singleton
  let loopExecutor = EventLoopGroupExecutor(group: eventLoops)
  // Per-caller limits pause the reads of a flooding caller's HTTP/2 connection.
  let limited = config.limits.callerRate != nil || !config.limits.callerRates.isEmpty
  let readPauses = limited ? ConnectionReadPauses() : nil
  let (services, chain, health, fastMethods, streamingMethods) = try buildServiceSet(
    store: store,
    pacing: EventLoopPacing(group: eventLoops),
    tokens: config.tokens,
    signIn: config.signIn,
    logRequests: config.logRequests,
    defaultDeadline: config.limits.defaultDeadline,
    maxStreamsPerClient: config.limits.maxStreamsPerClient,
    callerRates: (config.limits.callerRate, config.limits.callerRates),
    pausing: readPauses,
    tracing: config.tracing,
    logger: logger
  )
  let server = try makeServing(
    config: config,
    services: services,
    chain: chain,
    fastMethods: fastMethods,
    streamingMethods: streamingMethods,
    eventLoops: eventLoops,
    loopExecutor: loopExecutor,
    readPauses: readPauses
  )
  return RosterServer(
    store: store,
    seed: seed,
    background: config.signIn.map { [OIDCKeyRefresher(verifier: $0.verifier, logger: logger)] }
      ?? [],
    health: health,
    server: server,
    serverExecutor: loopExecutor,
    shutdownGrace: config.shutdownGrace,
    logger: logger
  )
}

/// Opens the store: the SQLite file, or PostgreSQL when `config.postgres` is set. When the
/// database is new, the returned `seed` loads the demo directory (`config.seedEmployees`
/// employees, their pictures and sales) through the same path as `roster import`.
/// `RosterServer` runs it as its first service work, before it listens, so a SIGTERM during
/// the seed stops the server cleanly on either backend.
public func openStore(
  config: ServerConfig,
  logger: Logger
) async throws -> (store: any StoreBackend, seed: (@Sendable () async throws -> Void)?) {
  let store: any StoreBackend
  let isNew: Bool
  let scratch: String
  if let postgres = config.postgres {
    let opened = try await PostgresStore.open(postgres, logger: logger)
    logger.info(
      "serving PostgreSQL",
      metadata: ["url": "\(postgres.url)", "schema": "\(postgres.schema)"]
    )
    (store, isNew, scratch) = (opened, opened.createdSchema, postgres.scratchDirectory + "/seed")
  } else {
    isNew = !FileManager.default.fileExists(atPath: config.store.path)
    store = try SQLiteStore(configuration: config.store, logger: logger)
    scratch = config.store.path + "-seed-pictures"
  }
  guard isNew && config.seedEmployees > 0 else { return (store, nil) }
  return (store, { try await seed(store, config: config, scratch: scratch, logger: logger) })
}

private func seed(
  _ store: some StoreBackend,
  config: ServerConfig,
  scratch: String,
  logger: Logger
) async throws {
  let started = ContinuousClock.now
  let source = DemoSource(
    demo: DemoData(count: config.seedEmployees, pictures: config.seedPictures),
    pictureScratch: config.demoPictures ?? scratch,
    keepsPictures: config.demoPictures != nil,
    salesPerEmployee: config.seedSalesPerEmployee
  )
  let loader = DirectoryLoader(
    context: WriteContext(author: "seed"),
    pictureConcurrency: config.store.pictures.thumbnailConcurrency,
    progress: .lines(every: .seconds(10)) { logger.info("seeding: \($0)") }
  )
  let report: LoadReport
  do {
    report = try await loader.load(source, into: store)
  } catch  where Task.isCancelled {
    // Whatever the store answered a cancelled seed with (PostgreSQL's pool answers a lease
    // it was waiting for with an error of its own), it is the seed's cancellation.
    throw CancellationError()
  }
  logger.info(
    "seeded demo data",
    metadata: [
      "employees": "\(report.employees.imported)",
      "pictures": "\(report.picturesStored)",
      "sales": "\(report.sales?.inserted ?? 0)",
      "duration": "\(ContinuousClock.now - started)",
    ]
  )
}
