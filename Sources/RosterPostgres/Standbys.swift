internal import CoreMetrics
internal import Logging
internal import PostgresNIO
internal import RosterDomain
internal import Synchronization

/// The hot standbys whose connections serve reads (`--postgres-read`): pages, search, counts,
/// analytics, streams and pictures, for the methods that may read there
/// (`CallControl.standbyReads`). Writes, the change feed and the store's own work stay on the
/// primary.
///
/// Each standby has a pool of its own (`HostPool`), which stops taking calls at once when its
/// host is lost and finds it again in the background. A read goes to the standbys in turn; one
/// that does not answer passes it to the next, and with none left the primary serves it.
///
/// Read-your-writes: a read that names a change token (`CallControl.mustSee`) goes only to a
/// standby that has replayed that change. Each standby's replayed end of the change log
/// (`change_log_state.last_seq`, numbered in commit order and replayed in that order) is read
/// every `standbyLagInterval`; a standby behind the token is asked again for up to
/// `standbyReplayWait`, then the next one, then the primary.
final class Standbys: Sendable {
  private let standbys: [Standby]
  private let next = Atomic<Int>(0)
  private let configuration: PostgresConfiguration
  private let logger: Logger

  /// Reads a standby served, and reads the primary served because no standby answered or had
  /// replayed the change they named.
  static let served = Counter(label: "roster_postgres_standby_reads_total")
  static let fallbacks = Counter(label: "roster_postgres_standby_fallbacks_total")

  final class Standby: Sendable {
    let name: String
    let pool: HostPool
    /// The newest change this standby was last seen to have replayed.
    let replayed = Atomic<Int64>(0)
    /// How far behind the primary it was last seen: seconds since the last transaction it
    /// replayed (0 once it has replayed all it received), and changes.
    let lagSeconds: Gauge
    let lagChanges: Gauge

    init(name: String, pool: HostPool) {
      self.name = name
      self.pool = pool
      self.lagSeconds = Gauge(
        label: "roster_postgres_standby_lag_seconds",
        dimensions: [("standby", name)]
      )
      self.lagChanges = Gauge(
        label: "roster_postgres_standby_lag_changes",
        dimensions: [("standby", name)]
      )
    }

    /// Reads the standby's replayed end of the log; nil when it cannot be reached.
    func replayedEnd(logger: Logger) async -> (sequence: Int64, lagSeconds: Double)? {
      try? await self.pool.withConnection { connection -> (Int64, Double)? in
        let rows = try await connection.query(
          """
          SELECT last_seq,
            CASE WHEN pg_last_wal_receive_lsn() IS NULL
              OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END
          FROM change_log_state
          """,
          logger: logger
        )
        for try await (sequence, lag) in rows.decode((Int64, Double?).self) {
          let known = self.replayed.load(ordering: .relaxed)
          if sequence > known { self.replayed.store(sequence, ordering: .relaxed) }
          return (sequence, max(0, lag ?? 0))
        }
        return nil
      }
    }
  }

  /// Pools for `urls`, each opened as the store's primary pool is (the schema, timeouts and
  /// TLS of `configuration`), with `target_session_attrs` as each URL says.
  init(urls: [PostgresURL], configuration: PostgresConfiguration, logger: Logger) throws {
    self.configuration = configuration
    self.logger = logger
    self.standbys = try urls.map { url in
      var standby = configuration
      standby.url = url
      let name = url.hosts.map(\.description).joined(separator: ",")
      // Not known to answer yet: calls go to the primary until `run` has reached it.
      let pool = try HostPool(
        configuration: standby,
        endpoint: url.hosts[0],
        found: false,
        metrics: .standby(name),
        logger: logger
      )
      return Standby(name: name, pool: pool)
    }
  }

  /// Runs every standby's pool, and reads each one's lag every `standbyLagInterval`, until
  /// cancelled.
  func run(primaryEnd: @escaping @Sendable () -> Int64) async {
    await withDiscardingTaskGroup { group in
      for standby in self.standbys {
        group.addTask { await standby.pool.run() }
        group.addTask {
          while !Task.isCancelled {
            if let (sequence, seconds) = await standby.replayedEnd(logger: self.logger) {
              standby.lagSeconds.record(seconds)
              standby.lagChanges.record(max(0, primaryEnd() - sequence))
            }
            try? await Task.sleep(for: self.configuration.standbyLagInterval)
          }
        }
      }
    }
  }

  /// Runs `body` with a standby's pool: the next in turn that serves and has replayed
  /// `mustSee`. Nil when none could (the primary's to serve): none answers, or none replayed
  /// the change in time. A standby lost during `body` passes it to the next.
  func serve<T: Sendable>(
    mustSee: Int64?,
    _ body: (HostPool) async throws -> T
  ) async throws -> T? {
    let first = self.next.add(1, ordering: .relaxed).oldValue
    for offset in 0 ..< self.standbys.count {
      let standby = self.standbys[(first + offset) % self.standbys.count]
      guard standby.pool.serving else { continue }
      if let mustSee, await !self.replayed(mustSee, by: standby) { continue }
      do {
        let value = try await body(standby.pool)
        Self.served.increment()
        return value
      } catch where Self.lost(error) && !Task.isCancelled {
        continue
      }
    }
    Self.fallbacks.increment()
    return nil
  }

  /// Whether `standby` has replayed `sequence`, asking it again for up to
  /// `standbyReplayWait` (and no later than the call's deadline).
  private func replayed(_ sequence: Int64, by standby: Standby) async -> Bool {
    if standby.replayed.load(ordering: .relaxed) >= sequence { return true }
    var end = ContinuousClock.now + self.configuration.standbyReplayWait
    if let deadline = CallControl.current?.deadline { end = min(end, deadline) }
    var pause = Duration.milliseconds(1)
    while true {
      guard let (seen, _) = await standby.replayedEnd(logger: self.logger) else { return false }
      if seen >= sequence { return true }
      guard ContinuousClock.now + pause < end, !Task.isCancelled else { return false }
      try? await Task.sleep(for: pause)
      pause = min(pause * 2, .milliseconds(50))
    }
  }

  /// Whether `error` says the standby cannot serve (lost, being found, or its pool retired):
  /// the read goes elsewhere. A statement's own failure (a timeout, a cancellation) does not.
  static func lost(_ error: any Error) -> Bool {
    if PostgresStore.losesHost(error) { return true }
    if let error = error as? StoreError { return error.code == .unavailable }
    return false
  }
}
