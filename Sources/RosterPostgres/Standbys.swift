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
    let pool: HostPool
    /// The newest change this standby was last seen to have replayed.
    let replayed = Atomic<Int64>(0)
    /// How far behind it was last seen, in milliseconds (`lagSeconds`).
    let lagMilliseconds = Atomic<Int64>(0)
    /// How far behind the primary it was last seen: the age of the oldest change the primary
    /// had that it had not replayed (0 when it had them all), and how many changes.
    let lagSeconds: Gauge
    let lagChanges: Gauge

    init(name: String, pool: HostPool) {
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
    func replayedEnd(logger: Logger) async -> Int64? {
      try? await self.pool.withConnection { connection -> Int64? in
        let rows = try await connection.query(
          "SELECT last_seq FROM change_log_state",
          logger: logger
        )
        for try await sequence in rows.decode(Int64.self) {
          let known = self.replayed.load(ordering: .relaxed)
          if sequence > known { self.replayed.store(sequence, ordering: .relaxed) }
          return sequence
        }
        return nil
      }
    }

    /// Reads the standby's replayed end and records its lag behind `primary`, the primary's
    /// ends as this replica saw them, oldest first (those it had replayed are dropped).
    func measure(
      behind primary: inout [(time: ContinuousClock.Instant, sequence: Int64)],
      logger: Logger
    ) async {
      guard let replayed = await self.replayedEnd(logger: logger) else { return }
      primary.removeAll { $0.sequence <= replayed }
      let lag = primary.first.map { ContinuousClock.now - $0.time } ?? .zero
      self.lagSeconds.record(lag / .seconds(1))
      self.lagMilliseconds.store(Int64(lag / .milliseconds(1)), ordering: .relaxed)
      self.lagChanges.record(max(0, (primary.last?.sequence ?? replayed) - replayed))
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

  /// The most samples of the primary's end a standby's lag is measured against.
  static let maximumSamples = 4096

  /// Runs every standby's pool, and reads each one's lag every `standbyLagInterval`, until
  /// cancelled: the age of the oldest change this replica knew the primary had (its change
  /// feed's end, sampled then) that the standby has not replayed. Every change to the data is
  /// in the change log, so this is how stale a read from the standby may be, to within the
  /// interval; PostgreSQL's own `pg_last_xact_replay_timestamp()` ages while the primary is
  /// idle too.
  func run(primaryEnd: @escaping @Sendable () -> Int64) async {
    await withDiscardingTaskGroup { group in
      for standby in self.standbys {
        group.addTask { await standby.pool.run() }
        group.addTask {
          // When the primary's end was first seen at each value the standby has not replayed
          // yet: the lag is the oldest one's age. Kept to `maximumSamples`, the oldest kept.
          var primary: [(time: ContinuousClock.Instant, sequence: Int64)] = []
          while !Task.isCancelled {
            let end = primaryEnd()
            if end > (primary.last?.sequence ?? standby.replayed.load(ordering: .relaxed)) {
              if primary.count == Self.maximumSamples { primary.remove(at: 1) }
              primary.append((.now, end))
            }
            await standby.measure(behind: &primary, logger: self.logger)
            try? await Task.sleep(for: self.configuration.standbyLagInterval)
          }
        }
      }
    }
  }

  /// Runs `body` with a standby's pool: the next in turn that serves, is no further behind
  /// than `standbyMaximumLag`, and has replayed `mustSee`. Nil when none could (the primary's
  /// to serve): none answers, or none replayed the change in time. A standby lost during
  /// `body` passes it to the next.
  func serve<T: Sendable>(
    mustSee: Int64?,
    _ body: (HostPool) async throws -> T
  ) async throws -> T? {
    let first = self.next.add(1, ordering: .relaxed).oldValue
    for offset in 0 ..< self.standbys.count {
      let standby = self.standbys[(first + offset) % self.standbys.count]
      guard standby.pool.serving, !self.tooFarBehind(standby) else { continue }
      if let mustSee, await !self.replayed(mustSee, by: standby) { continue }
      do {
        let value = try await body(standby.pool)
        Self.served.increment()
        return value
      } catch  where Self.lost(error) && !Task.isCancelled {
        continue
      }
    }
    Self.fallbacks.increment()
    return nil
  }

  /// Whether `standby` was last seen further behind than `standbyMaximumLag`.
  private func tooFarBehind(_ standby: Standby) -> Bool {
    guard let limit = self.configuration.standbyMaximumLag else { return false }
    return standby.lagMilliseconds.load(ordering: .relaxed) > Int64(limit / .milliseconds(1))
  }

  /// Whether `standby` has replayed `sequence`, asking it again for up to
  /// `standbyReplayWait` (and no later than the call's deadline).
  private func replayed(_ sequence: Int64, by standby: Standby) async -> Bool {
    if standby.replayed.load(ordering: .relaxed) >= sequence { return true }
    var end = ContinuousClock.now + self.configuration.standbyReplayWait
    if let deadline = CallControl.current?.deadline { end = min(end, deadline) }
    var pause = Duration.milliseconds(1)
    while true {
      guard let seen = await standby.replayedEnd(logger: self.logger) else { return false }
      if seen >= sequence { return true }
      guard ContinuousClock.now + pause < end, !Task.isCancelled else { return false }
      try? await Task.sleep(for: pause)
      pause = min(pause * 2, .milliseconds(50))
    }
  }

  /// Whether `error` says the standby cannot serve the read, which goes elsewhere: what a
  /// client would be told is `unavailable` (the standby lost, being found, its pool retired or
  /// unable to connect; or a read it cancelled to replay changes that conflicted with it,
  /// SQLSTATE 40001). A statement's own failure (a timeout, a cancellation) is the call's.
  static func lost(_ error: any Error) -> Bool {
    (PostgresStore.mapped(error) as? StoreError)?.code == .unavailable
  }
}
