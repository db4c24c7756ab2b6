internal import CoreMetrics
internal import Logging
internal import PostgresNIO
internal import RosterDomain
internal import RosterLocks
internal import Synchronization
internal import _ConnectionPoolModule

/// The connection pool, on the host the address's `target_session_attrs` names, moved to
/// another host when that one is lost.
///
/// A call that loses its connection to the server (or finds it a standby, demoted) makes the
/// pool suspect its host: until a host that suits answers again, every call fails at once with
/// `unavailable` instead of waiting for a connection to a server that is gone (postgres-nio's
/// pool would queue it until its circuit breaker trips). `run` looks for the host, as
/// `HostFinder` does, every half second; a different host gets a new pool, and the old one is
/// shut down, failing what still waited on it.
///
/// A host lost while the pool's connections sat idle fails no call: postgres-nio queues the
/// calls while it tries to connect. So `run` also watches the leases: when calls have waited
/// for a connection `stuckAfter` with none given meanwhile, it connects to the host itself,
/// and if that fails suspects it and shuts the pool down (what waited on it fails); so does a
/// call that the pool could not connect for (its circuit breaker). The host found then, the
/// same or another, gets a new pool: the old one's attempts back off, up to a minute.
final class HostPool: Sendable {
  private let configuration: PostgresConfiguration
  private let logger: Logger
  private let state: Locked<State>
  private let metrics: Metrics
  /// Leases asked for, and leases settled (a connection given, or the lease failed): the
  /// watchdog's view of whether calls wait on a pool that gives nothing.
  private let leasesAsked = Atomic<Int>(0)
  private let leasesSettled = Atomic<Int>(0)
  /// The connections given to leases that are still open: what the keep-alive pings.
  private let open = Locked<Set<ObjectIdentifier>>([])
  /// Connections leased now: the rest of `open` are idle.
  private let leased = Atomic<Int>(0)

  private struct State {
    var client: PostgresClient
    var endpoint: PostgresURL.Endpoint
    /// `client.run()`, once `run` started it.
    var running: Task<Void, Never>?
    /// Since when the host is suspected (no calls until it or another is found); nil while
    /// the pool serves.
    var suspectedSince: ContinuousClock.Instant?
    /// `run`, waiting for a suspicion.
    var waiting: CheckedContinuation<Void, Never>?
  }

  /// - Parameters:
  ///   - endpoint: the host to use first.
  ///   - found: whether `endpoint` is known to answer (the migrator connected to it); when
  ///     not, calls fail at once until `run` has reached a host.
  init(
    configuration: PostgresConfiguration,
    endpoint: PostgresURL.Endpoint,
    found: Bool = true,
    metrics: Metrics = .primary,
    logger: Logger
  ) throws {
    self.configuration = configuration
    self.logger = logger
    self.metrics = metrics
    let client = PostgresClient(
      configuration: try Self.clientConfiguration(configuration, endpoint: endpoint),
      backgroundLogger: logger
    )
    self.state = Locked(
      State(client: client, endpoint: endpoint, suspectedSince: found ? nil : .now)
    )
    metrics.finding.record(found ? 0 : 1)
  }

  /// Hosts suspected lost, moves to another host, and whether one is being found now (1) or
  /// the pool serves (0), on `/metrics`.
  struct Metrics: Sendable {
    let lost: Counter
    let moves: Counter
    let finding: Gauge

    /// The primary's pool.
    static let primary = Metrics(
      lost: Counter(label: "roster_postgres_hosts_lost_total"),
      moves: Counter(label: "roster_postgres_host_moves_total"),
      finding: Gauge(label: "roster_postgres_finding_host")
    )

    /// The pool of the standby `name` (`Standbys`).
    static func standby(_ name: String) -> Metrics {
      let dimensions = [("standby", name)]
      return Metrics(
        lost: Counter(label: "roster_postgres_standby_lost_total", dimensions: dimensions),
        moves: Counter(label: "roster_postgres_standby_moves_total", dimensions: dimensions),
        finding: Gauge(label: "roster_postgres_standby_down", dimensions: dimensions)
      )
    }
  }

  /// Whether calls may run now: false while the host is suspected.
  var serving: Bool {
    self.state.withLock { $0.suspectedSince == nil }
  }

  /// Runs `body` on a pooled connection of the current host.
  ///
  /// - Throws: `unavailable` at once while the host is suspected.
  func withConnection<T: Sendable>(
    _ body: (PostgresConnection) async throws -> T
  ) async throws -> T {
    let client = try self.state.withLock { state in
      if state.suspectedSince != nil { throw Self.lookingForHost }
      return state.client
    }
    self.leasesAsked.add(1, ordering: .relaxed)
    var given = false
    do {
      return try await client.withConnection { connection in
        given = true
        self.leasesSettled.add(1, ordering: .relaxed)
        self.track(connection)
        self.leased.add(1, ordering: .relaxed)
        defer { self.leased.subtract(1, ordering: .relaxed) }
        return try await body(connection)
      }
    } catch {
      if !given { self.leasesSettled.add(1, ordering: .relaxed) }
      if !Task.isCancelled, PostgresStore.losesHost(error) {
        self.suspect(
          because: error,
          closing: (error as? ConnectionPoolError) == .connectionCreationCircuitBreakerTripped
        )
      }
      // A pool shut down meanwhile (`poolShutdown`) is `unavailable` where the store maps
      // its errors (`PostgresStore.mapped`).
      throw error
    }
  }

  /// How many of the pool's connections are open now (each counted from its first lease until
  /// it closes).
  var openConnections: Int {
    self.open.withLock { $0.count }
  }

  /// How many open connections no one leases now: the keep-alive pings as many at once
  /// (`PostgresStore.keepAlive`); a leased one is in use, and alive as long as it answers.
  var idleConnections: Int {
    max(0, self.openConnections - self.leased.load(ordering: .relaxed))
  }

  private func track(_ connection: PostgresConnection) {
    let key = ObjectIdentifier(connection)
    guard self.open.withLock({ $0.insert(key).inserted }) else { return }
    connection.closeFuture.whenComplete { _ in
      _ = self.open.withLock { $0.remove(key) }
    }
  }

  /// Runs one statement on the current host, for work that must not wait for a call's
  /// connection (a cancel of a statement it runs), and returns how many rows it gave.
  @discardableResult
  func query(_ query: PostgresQuery) async throws -> Int {
    let client = self.state.withLock { $0.client }
    return try await client.query(query, logger: self.logger).collect().count
  }

  static let lookingForHost = StoreError(
    .unavailable,
    "the database host was lost and another is being found; try again"
  )

  /// The current host is lost, or no longer suits (a call found it gone or a standby):
  /// calls fail at once until `run` finds one that suits.
  ///
  /// `closing`: the pool cannot connect to the host; it is shut down at once, so the calls
  /// waiting for one of its connections fail too (`poolShutdown`: unavailable), and `findHost`
  /// makes a new one. Otherwise (a connection lost, a write refused) the calls it serves go on.
  func suspect(because error: any Error, closing: Bool = false) {
    let (lost, waiting, pool) = self.state.withLock { state in
      guard state.suspectedSince == nil else {
        return (
          nil as PostgresURL.Endpoint?, nil as CheckedContinuation<Void, Never>?,
          nil as Task<Void, Never>?
        )
      }
      state.suspectedSince = .now
      let pool = closing ? state.running : nil
      if closing { state.running = nil }
      defer { state.waiting = nil }
      return (state.endpoint, state.waiting, pool)
    }
    guard let lost else { return }
    pool?.cancel()
    self.metrics.lost.increment()
    self.metrics.finding.record(1)
    self.logger.warning(
      "lost the PostgreSQL host; finding the one to use",
      metadata: ["host": "\(lost)", "error": "\(String(reflecting: error))"]
    )
    waiting?.resume()
  }

  /// Runs the pool, and finds the host again each time it is suspected, until cancelled;
  /// then shuts the pool down.
  func run() async {
    // A host not known to answer yet gets its pool run once found (`findHost`): a pool
    // without a server keeps trying to connect.
    self.state.withLock { state in
      guard state.suspectedSince == nil else { return }
      let client = state.client
      state.running = Task { await client.run() }
    }
    await withDiscardingTaskGroup { group in
      group.addTask { await self.watchLeases() }
      group.addTask {
        while !Task.isCancelled {
          await self.suspicion()
          guard !Task.isCancelled else { break }
          await self.findHost()
        }
      }
      // Both end when the task is cancelled.
    }
    let running = self.state.withLock { state in
      defer { state.running = nil }
      return state.running
    }
    running?.cancel()
    await running?.value
  }

  /// How long calls may wait for a connection, with none given to any, before the watchdog
  /// checks that the host still answers.
  static let stuckAfter: Duration = .seconds(1)

  /// Every quarter of `stuckAfter`: when leases wait and none has settled for `stuckAfter`,
  /// connects to the host (for at most the configuration's `hostAnswerLimit`) and suspects it
  /// if that fails. Until cancelled.
  private func watchLeases() async {
    var settled = self.leasesSettled.load(ordering: .relaxed)
    var since = ContinuousClock.now
    while !Task.isCancelled {
      try? await Task.sleep(for: Self.stuckAfter / 4)
      let now = self.leasesSettled.load(ordering: .relaxed)
      let waiting = self.leasesAsked.load(ordering: .relaxed) > now
      if now != settled || !waiting || !self.serving {
        (settled, since) = (now, .now)
        continue
      }
      guard ContinuousClock.now - since >= Self.stuckAfter else { continue }
      let endpoint = self.state.withLock { $0.endpoint }
      let finder = HostFinder(configuration: self.configuration, logger: self.logger)
      let answers = await FirstAnswer.within(self.configuration.hostAnswerLimit) {
        await finder.answers(endpoint)
      }
      if !answers, !Task.isCancelled, self.leasesSettled.load(ordering: .relaxed) == settled {
        self.suspect(because: Self.leasesStuck, closing: true)
      }
      since = .now
    }
  }

  static let leasesStuck = StoreError(
    .unavailable,
    "calls waited for a connection and the host did not accept one of its own"
  )

  /// Returns once the host is suspected (or the task is cancelled).
  private func suspicion() async {
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let now = self.state.withLock { state in
          if state.suspectedSince != nil || Task.isCancelled { return true }
          state.waiting = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      self.state.withLock { state in
        defer { state.waiting = nil }
        return state.waiting
      }?.resume()
    }
  }

  /// Looks for the host that suits, every half second, until one answers; moves the pool
  /// there if it is another, and lets calls through again.
  private func findHost() async {
    let finder = HostFinder(configuration: self.configuration, logger: self.logger)
    while !Task.isCancelled {
      guard let (connection, endpoint) = try? await finder.connect(attempts: 1) else {
        try? await Task.sleep(for: .milliseconds(500))
        continue
      }
      try? await connection.close()
      // The address's TLS settings were read when the store opened: this does not fail.
      guard
        let configuration = try? Self.clientConfiguration(self.configuration, endpoint: endpoint)
      else { continue }
      let client = PostgresClient(configuration: configuration, backgroundLogger: self.logger)
      // The same host keeps its pool, unless the suspicion shut it down (`suspect`) or it never
      // ran; another host gets a new one, and the old one is shut down.
      let (moved, retired, since) = self.state.withLock { state in
        let since = state.suspectedSince ?? .now
        let moved = endpoint != state.endpoint
        state.suspectedSince = nil
        if !moved, state.running != nil { return (moved, nil as Task<Void, Never>?, since) }
        let retired = state.running
        (state.client, state.endpoint) = (client, endpoint)
        state.running = Task { await client.run() }
        return (moved, retired, since)
      }
      self.metrics.finding.record(0)
      if moved { self.metrics.moves.increment() }
      self.logger.info(
        moved ? "moved to another PostgreSQL host" : "the PostgreSQL host answers again",
        metadata: ["host": "\(endpoint)", "after": "\(ContinuousClock.now - since)"]
      )
      // The lost host's pool fails what still waits on it (`poolShutdown`: unavailable).
      retired?.cancel()
      return
    }
  }

  /// A pool's configuration: up to `maximumConnections` on `endpoint`, one kept open, and the
  /// keep-alive the store's own (`PostgresStore.keepAlive`).
  static func clientConfiguration(
    _ configuration: PostgresConfiguration,
    endpoint: PostgresURL.Endpoint
  ) throws -> PostgresClient.Configuration {
    var options = PostgresClient.Configuration.Options()
    options.maximumConnections = configuration.maximumConnections
    // A minimum of one connection: postgres-nio's pool (1.33) keeps only one of the
    // connections it failed to open while PostgreSQL refused them, and opens one more each
    // time a connection comes back to waiting statements; a lease that then needs a new
    // connection while the pool holds fewer than its minimum stops the process (a
    // precondition; `PoolTests.refusedThenBack`). With one, the connections above it get
    // the pool's idle timer. The keep-alive is the store's own (`keepAlive`): postgres-nio's
    // starts a timer each time a connection comes back.
    options.minimumConnections = 1
    options.keepAliveBehavior = nil
    options.additionalStartupParameters = PostgresStore.sessionParameters(configuration)
    let url = configuration.url.at(endpoint)
    var clientConfiguration = PostgresClient.Configuration(
      host: url.host,
      port: url.port,
      username: url.username,
      password: url.password,
      database: url.database,
      tls: try url.clientTLS()
    )
    clientConfiguration.options = options
    return clientConfiguration
  }
}
