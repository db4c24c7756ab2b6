import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterLocks
import RosterProto
import SwiftProtobuf
import TestSupport
import Testing

/// Robust under load, through the real binary: heavy calls never stall cheap ones, a passed
/// deadline stops the server's work, a full heavy queue refuses at once, and aggregates page.
///
/// The database is seeded once for the suite: `ROSTER_ROBUST_EMPLOYEES` employees (20,000 by
/// default) with `ROSTER_ROBUST_SALES` demo sales each (25), so one heavy call (a MEDIAN over
/// every sale, grouped by year, on a server whose median pages have no sales budget:
/// `--median-rows-per-page 0`) takes about a second in a debug build. No test here times a
/// call: how fast cheap calls stay beside heavy ones is scripts/bench-robust's measurement.
@Suite("Robust under load, end to end", .serialized, .timeLimit(.minutes(10)), .removingTheDatabase)
struct RobustnessTests {
  static let employees =
    Int(ProcessInfo.processInfo.environment["ROSTER_ROBUST_EMPLOYEES"] ?? "") ?? 20_000
  static let salesPerEmployee =
    Int(ProcessInfo.processInfo.environment["ROSTER_ROBUST_SALES"] ?? "") ?? 25
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
  static let directory = Locked<String?>(nil)

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

  @Test("with 8 heavy calls queued and running, cheap calls finish before the heavy ones")
  func isolation() async throws {
    // One heavy call at a time, so the eight take eight heavy calls' time (seconds here). No
    // budget of the server's own: the heavy lane runs only on cores nothing else wants, and on
    // a machine saturated by other suites its calls spent the 30 s default waiting for one.
    let arguments = ["--heavy-concurrency", "1", "--heavy-queue", "8", "--max-query-seconds", "0"]
    try await Self.withServer(arguments) { _, client in
      let directory = Roster_V1_Directory.Client(wrapping: client)
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      let health = Grpc_Health_V1_Health.Client(wrapping: client)
      let guids = try await directory.listEmployees(.with { $0.pageSize = 100 }).employees.map(
        \.guid
      )
      // Long enough for the last of the eight to wait for the seven before it, on a machine
      // busy with other suites.
      var options = CallOptions.defaults
      options.timeout = .seconds(300)
      try await withThrowingTaskGroup(of: Void.self) { group in
        let finished = Tally()
        for _ in 0 ..< 8 {
          group.addTask { [options] in
            _ = try await analytics.aggregateSales(Self.heavy, options: options)
            finished.add()
          }
        }
        // Until the server holds all eight: one runs, seven wait in the heavy lane.
        try await Task.sleep(for: .milliseconds(300))
        for guid in guids {
          #expect(try await health.check(.init()).status == .serving)
          #expect(try await directory.getEmployee(.with { $0.guid = guid }).guid == guid)
        }
        // Were heavy work on the threads that read and answer calls, the cheap calls, sent
        // after the heavy ones, would be answered only after them.
        let heavyDone = finished.count
        print("RobustnessTests: \(heavyDone) of 8 heavy calls had finished after the cheap ones")
        #expect(heavyDone < 8, "the cheap calls waited for every heavy call")
        try await group.waitForAll()
        #expect(finished.count == 8)
      }
    }
  }

  @Test("a heavy call past its deadline, the client's or the default, is interrupted on the server")
  func interrupt() async throws {
    // No budget of the server's own: only the call's deadline may stop the query (the client's,
    // or the server's default for the last call, which brings none).
    try await Self.withServer(
      ["--max-query-seconds", "0", "--default-deadline-ms", "100", "--metrics-port", "0"]
    ) { server, client in
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      let interrupted = #"roster_lane_interrupted_total{lane="heavy"}"#
      // A warm-up, which must outlast the deadlines below, or there is nothing to interrupt.
      var options = CallOptions.defaults
      options.timeout = .seconds(60)
      let started = ContinuousClock.now
      _ = try await analytics.aggregateSales(Self.heavy, options: options)
      let warmUp = ContinuousClock.now - started
      try #require(
        warmUp >= .milliseconds(300),
        "the heavy call took \(warmUp): too little work to interrupt"
      )
      #expect(try await server.metric(interrupted) == 0)

      options.timeout = .milliseconds(100)
      await expectStatus(.deadlineExceeded, mentioning: "timed out") {
        _ = try await analytics.aggregateSales(Self.heavy, options: options)
      }
      // The lane counts the statement it interrupted once the statement has stopped. Without
      // the interrupt it would run to its end and count nothing.
      #expect(try await eventually { try await server.metric(interrupted) == 1 })

      // A call that brings no deadline gets the server's default (0.1 s here).
      await expectStatus(.deadlineExceeded, mentioning: "default of") {
        _ = try await analytics.aggregateSales(Self.heavy)
      }
      #expect(try await eventually { try await server.metric(interrupted) == 2 })
    }
  }

  @Test("past the heavy queue, a call gets RESOURCE_EXHAUSTED at once and the server stays healthy")
  func admission() async throws {
    try await Self.withServer(["--heavy-concurrency", "1", "--heavy-queue", "1"]) { _, client in
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      let health = Grpc_Health_V1_Health.Client(wrapping: client)
      try await withThrowingTaskGroup(of: Void.self) { group in
        // One runs, one waits.
        let finished = Tally()
        for _ in 0 ..< 2 {
          group.addTask {
            _ = try? await analytics.aggregateSales(Self.heavy)
            finished.add()
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
        #expect(finished.count == 0, "refused only after a heavy call had ended")
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
  private let value = Locked(0)

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
