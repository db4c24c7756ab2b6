internal import GRPCCore
internal import GRPCNIOTransportHTTP2
public import Histogram
internal import NIOPosix
internal import RosterDomain
internal import RosterLocks
internal import Synchronization

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// What a run produced: the report, and the histograms behind it for plots and `.hgrm` files.
public struct LoadResult: Sendable {
  /// Figures by scenario and in total.
  public var report: LoadReport
  /// Latency in microseconds, by scenario.
  public var histograms: [Scenario: Histogram<UInt64>]
  /// Latency in microseconds over every scenario.
  public var total: Histogram<UInt64>
}

/// Lets a caller end a run early (for example on Ctrl-C); the report covers what ran.
public final class LoadStop: Sendable {
  private let flag = Atomic<Bool>(false)

  public init() {}

  /// Asks the run to stop sending; requests in flight still finish.
  public func stop() { self.flag.store(true, ordering: .relaxed) }

  var isStopped: Bool { self.flag.load(ordering: .relaxed) }
}

/// Runs one load against a Roster server.
///
/// It opens the connections, discovers the data it needs from the service itself, warms up,
/// then measures for the configured length and returns the figures.
public struct LoadRunner: Sendable {
  /// What to run.
  public let configuration: LoadConfiguration

  public init(configuration: LoadConfiguration) {
    self.configuration = configuration
  }

  /// Runs the load.
  ///
  /// - Parameters:
  ///   - stop: ends the run early when triggered.
  ///   - discovered: called once discovery is done, with the number of employees seen.
  ///   - progress: called about once a second while the load runs.
  /// - Throws: `LoadError` when discovery finds nothing to send, or the transport's error when
  ///   the server cannot be reached.
  public func run(
    stop: LoadStop = LoadStop(),
    discovered: @Sendable (Int) -> Void = { _ in },
    progress: @escaping @Sendable (LoadProgress) -> Void = { _ in }
  ) async throws -> LoadResult {
    let configuration = self.configuration
    var clients: [GRPCClient<HTTP2ClientTransport.Posix>] = []
    for _ in 0 ..< configuration.connections {
      let transport = try HTTP2ClientTransport.Posix(
        target: configuration.target,
        transportSecurity: configuration.transportSecurity
      )
      clients.append(GRPCClient(transport: transport, interceptors: configuration.interceptors))
    }
    let unary = try await Self.unaryConnections(configuration)
    do {
      let result = try await Self.run(
        configuration,
        clients: clients,
        unary: unary,
        stop: stop,
        discovered: discovered,
        progress: progress
      )
      for connection in unary { await connection?.close() }
      return result
    } catch {
      for connection in unary { await connection?.close() }
      throw error
    }
  }

  // MARK: - Private

  private static func run(
    _ configuration: LoadConfiguration,
    clients: [GRPCClient<HTTP2ClientTransport.Posix>],
    unary: [UnaryConnection?],
    stop: LoadStop,
    discovered: @Sendable (Int) -> Void,
    progress: @escaping @Sendable (LoadProgress) -> Void
  ) async throws -> LoadResult {
    try await withThrowingTaskGroup(of: Void.self) { group in
      for client in clients {
        group.addTask { try await client.runConnections() }
      }
      defer { clients.forEach { $0.beginGracefulShutdown() } }
      let connections = zip(clients, unary).map { Connection($0, unary: $1) }
      let workload = try await Workload.discover(on: connections[0], configuration: configuration)
      discovered(workload.employeesSeen)
      let result = try await Self.drive(
        configuration: configuration,
        connections: connections,
        workload: workload,
        stop: stop,
        progress: progress
      )
      clients.forEach { $0.beginGracefulShutdown() }
      try await group.waitForAll()
      return result
    }
  }

  /// One lean unary connection per connection when `leanUnary` is on, spread over the loops.
  private static func unaryConnections(
    _ configuration: LoadConfiguration
  ) async throws -> [UnaryConnection?] {
    guard configuration.leanUnary, let address = configuration.target.addresses.first else {
      return Array(repeating: nil, count: configuration.connections)
    }
    var headers: [(String, String)] = []
    for (key, value) in configuration.metadata {
      if case .string(let text) = value { headers.append((key, text)) }
    }
    var connections: [UnaryConnection?] = []
    for _ in 0 ..< configuration.connections {
      do {
        connections.append(
          try await UnaryConnection.connect(
            host: address.host,
            port: address.port,
            metadata: headers,
            on: MultiThreadedEventLoopGroup.singleton.next()
          )
        )
      } catch {
        for connection in connections { await connection?.close() }
        throw RPCError(
          code: .unavailable,
          message: "could not connect to \(address.host):\(address.port): \(error)"
        )
      }
    }
    return connections
  }

  /// What the senders and the clock share; a class, so that tasks can capture it.
  private final class SharedCounters: Sendable {
    /// Measured requests handed out, in `--requests` mode.
    let tickets = Atomic<Int>(0)
    /// The process's CPU seconds when measuring began.
    let cpuAtMeasureStart = Locked<Double?>(nil)
  }

  /// The timeline every sender follows.
  private struct Timeline: Sendable {
    let start: ContinuousClock.Instant
    let measureFrom: ContinuousClock.Instant
    /// Set in duration mode: nothing is sent at or after it.
    let end: ContinuousClock.Instant?
  }

  private static func drive(
    configuration: LoadConfiguration,
    connections: [Connection],
    workload: Workload,
    stop: LoadStop,
    progress: @escaping @Sendable (LoadProgress) -> Void
  ) async throws -> LoadResult {
    let recorder = LoadRecorder()
    let start = ContinuousClock.now
    let measureFrom = start + configuration.warmup
    let end: ContinuousClock.Instant?
    let quota: Int?
    switch configuration.length {
    case .duration(let duration): (end, quota) = (measureFrom + duration, nil)
    case .requests(let count): (end, quota) = (nil, count)
    }
    let timeline = Timeline(start: start, measureFrom: measureFrom, end: end)
    let shared = SharedCounters()

    try await withThrowingTaskGroup(of: Void.self) { group in
      // The clock: progress once a second, and the CPU reading when measuring starts.
      group.addTask {
        if configuration.warmup == .zero {
          shared.cpuAtMeasureStart.withLock { $0 = processCPUSeconds() }
        }
        var next = start + .seconds(1)
        while !Task.isCancelled {
          let wake = shared.cpuAtMeasureStart.withLock { $0 == nil } ? min(next, measureFrom) : next
          try? await Task.sleep(until: wake, clock: .continuous)
          if Task.isCancelled { return }
          let now = ContinuousClock.now
          if now >= measureFrom {
            shared.cpuAtMeasureStart.withLock { if $0 == nil { $0 = processCPUSeconds() } }
          }
          guard now >= next else { continue }
          next = next + .seconds(1)
          let (interval, requests, errors) = recorder.takeInterval()
          progress(
            LoadProgress(
              elapsed: (now - start).inSeconds,
              warmingUp: now < measureFrom,
              qps: Double(interval.requests),
              p50: interval.histogram.valueAtPercentile(50),
              p99: interval.histogram.valueAtPercentile(99),
              requests: requests,
              errors: errors,
              inFlight: recorder.inFlight
            )
          )
        }
      }
      // The senders.
      try await withThrowingDiscardingTaskGroup { senders in
        switch configuration.model {
        case .closed(let concurrency):
          for worker in 0 ..< concurrency {
            let connection = connections[worker % connections.count]
            senders.addTask {
              var random = SplitMix64(
                seed: configuration.seed &+ UInt64(worker) &* 0x9E37_79B9_7F4A_7C15
              )
              while !stop.isStopped {
                let sent = ContinuousClock.now
                if let end = timeline.end, sent >= end { return }
                let measured = sent >= timeline.measureFrom
                if measured, let quota, shared.tickets.add(1, ordering: .relaxed).newValue > quota {
                  return
                }
                let scenario = configuration.mix.pick(random.next())
                recorder.started()
                await Self.send(
                  scenario,
                  on: connection,
                  workload: workload,
                  random: &random,
                  sent: sent,
                  measured: measured,
                  recorder: recorder
                )
              }
            }
          }
        case .open(let rate, let maxInFlight):
          let interval = 1.0 / rate
          var random = SplitMix64(seed: configuration.seed)
          var index = 0
          var measuredSent = 0
          while !stop.isStopped {
            let intended =
              timeline.start + .nanoseconds(Int64((Double(index) * interval * 1e9).rounded()))
            if let end = timeline.end, intended >= end { break }
            let measured = intended >= timeline.measureFrom
            if measured, let quota {
              if measuredSent >= quota { break }
              measuredSent += 1
            }
            if intended > ContinuousClock.now {
              try await Task.sleep(until: intended, clock: .continuous)
            }
            // Past the in-flight cap, wait: the wait still counts against the late requests,
            // because their latency runs from the intended time.
            while recorder.inFlight >= maxInFlight { try await Task.sleep(for: .microseconds(200)) }
            let connection = connections[index % connections.count]
            let scenario = configuration.mix.pick(random.next())
            let seed = random.next()
            recorder.started()
            senders.addTask {
              var requestRandom = SplitMix64(seed: seed)
              await Self.send(
                scenario,
                on: connection,
                workload: workload,
                random: &requestRandom,
                sent: intended,
                measured: measured,
                recorder: recorder
              )
            }
            index += 1
          }
        }
      }
      group.cancelAll()
    }

    let cpuEnd = processCPUSeconds()
    let (tallies, lastCompletion) = recorder.results()
    let measuredSeconds = lastCompletion.map { ($0 - timeline.measureFrom).inSeconds } ?? 0
    let cpuStart = shared.cpuAtMeasureStart.withLock { $0 } ?? cpuEnd
    return LoadReport.make(
      configuration: configuration,
      tallies: tallies,
      seconds: measuredSeconds,
      employeesSeen: workload.employeesSeen,
      clientCPUSeconds: cpuEnd - cpuStart
    )
  }

  /// Sends one request (already counted as started) and records it, measuring from `sent` (the intended time in open loop).
  private static func send(
    _ scenario: Scenario,
    on connection: Connection,
    workload: Workload,
    random: inout SplitMix64,
    sent: ContinuousClock.Instant,
    measured: Bool,
    recorder: LoadRecorder
  ) async {
    var status: Int? = nil
    var items = 0
    do {
      items = try await workload.perform(scenario, on: connection, random: &random)
    } catch let error as RPCError {
      status = error.code.rawValue
    } catch {
      status = RPCError.Code.unknown.rawValue
    }
    let now = ContinuousClock.now
    recorder.finished(
      scenario,
      latency: now - sent,
      status: status,
      items: items,
      measured: measured,
      at: now
    )
  }
}

/// User plus system CPU time of this process, in seconds.
func processCPUSeconds() -> Double {
  var usage = rusage()
  #if canImport(Glibc)
  getrusage(RUSAGE_SELF.rawValue, &usage)
  #else
  getrusage(RUSAGE_SELF, &usage)
  #endif
  func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
  return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

extension SplitMix64 {
  /// A uniform index below `count`.
  mutating func index(_ count: Int) -> Int { Int(self.next() % UInt64(count)) }
}
