import Foundation
import PostgresNIO
import RosterDomain
import RosterLocks
import TestSupport
import Testing

@testable import RosterPostgres

/// Heavy reads on PostgreSQL: admitted a few at a time, and stopped at the server when their
/// call is cancelled or its deadline passes.
@Suite("PostgreSQL heavy reads", .timeLimit(.minutes(10)), .enabled(if: PostgresTesting.enabled))
struct HeavyReadTests {
  /// A heavy read that holds its place for `seconds` at the server.
  static func sleep(_ store: PostgresStore, seconds: Double) async throws {
    _ = try await store.heavy {
      try await $0.rows(PostgresQuery(unsafeSQL: "SELECT pg_sleep(\(seconds))"))
    }
  }

  /// Statements running `pg_sleep(seconds)` at the server now (each test sleeps for a
  /// length of its own, as the tests run side by side).
  static func sleepers(_ configuration: PostgresConfiguration, seconds: Double) async throws -> Int
  {
    let rows = try await PostgresTesting.query(
      configuration,
      "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%SELECT pg_sleep(\(seconds))' AND state = 'active'"
    )
    return try rows.first?.decode(Int.self) ?? 0
  }

  @Test(
    "past the running and waiting places, a heavy read is refused at once with RESOURCE_EXHAUSTED"
  )
  func admission() async throws {
    var configuration = try PostgresTesting.configuration()
    configuration.heavyReads = 1
    configuration.heavyQueueLimit = 1
    try await PostgresTesting.withStore(configuration) { store in
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0 ..< 2 { group.addTask { try await Self.sleep(store, seconds: 4) } }
        // Wait until one runs and one waits.
        #expect(try await eventually { store.heavyReads.load == (1, 1) })
        let error = await #expect(throws: StoreError.self) {
          try await Self.sleep(store, seconds: 4)
        }
        #expect(error?.code == .resourceExhausted)
        #expect(error?.message.contains("busy") == true)
        // At once: the running and the waiting read still hold their places (waiting would
        // have taken the 4 s of the read ahead).
        #expect(store.heavyReads.load == (1, 1), "refused at once, not after waiting")
        // Reads that are not heavy are not held up by the heavy ones: it is back while they
        // still hold their places.
        _ = try await store.departmentCounts()
        #expect(store.heavyReads.load == (1, 1), "the point read waited for the heavy reads")
        try await group.waitForAll()
      }
      #expect(store.heavyReads.load == (0, 0))
    }
  }

  @Test(
    "a heavy read in a transaction whose statement fails ends with that error, and gives its place back"
  )
  func failedInTransaction() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let error = try await #require(throws: PSQLError.self) {
        try await store.heavy(transaction: true) {
          _ = try await $0.rows("SET LOCAL enable_no_such_plan = off")
          return try await $0.rows("SELECT 1")
        }
      }
      #expect(PostgresStore.sqlState(error) == "42704", "\(String(reflecting: error))")
      #expect(store.heavyReads.load == (0, 0))
      let rows = try await store.heavy(transaction: true) { try await $0.rows("SELECT 2") }
      #expect(try rows.first?[0].decode(Int.self) == 2)
    }
  }

  @Test("a call cancelled before its statement runs still has it stopped once it does")
  func cancelledBeforeRunning() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let control = CallControl(deadline: nil)
      let started = ContinuousClock.now
      let error = try await #require(throws: StoreError.self) {
        try await CallControl.$current.withValue(control) {
          try await store.heavy { read in
            // The cancel finds no statement of the read running, and is sent again.
            control.cancel()
            try await Task.sleep(for: .milliseconds(300))
            return try await read.rows("SELECT pg_sleep(60.4)")
          }
        }
      }
      #expect(error.code == .cancelled)
      #expect(ContinuousClock.now - started < .seconds(15), "stopped, not waited out")
      #expect(try await Self.sleepers(configuration, seconds: 60.4) == 0)
    }
  }

  @Test(
    "a cancel that has not landed when the read's connection is closed stops its statement once it runs"
  )
  func cancelledPastTheClose() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let control = CallControl(deadline: nil)
      let backend = Locked<Int32?>(nil)
      var thrown: (any Error)?
      do {
        _ = try await CallControl.$current.withValue(control) {
          try await store.heavy { read in
            let pid = try #require(
              try await read.row("SELECT pg_backend_pid()")?[0].decode(Int32.self)
            )
            backend.withLock { $0 = pid }
            // The backend, stopped while idle, runs nothing the cancels could find: 2 s after
            // the cancel `LeftBehind` closes the connection, and the read ends; the statement
            // is in the backend's socket, and runs once the backend is woken.
            #expect(
              try await eventually {
                try await Self.state(configuration, of: pid) == "idle"
              }
            )
            #expect(kill(pid_t(pid), SIGSTOP) == 0)
            control.cancel()
            return try await read.rows("SELECT pg_sleep(60.5)")
          }
        }
      } catch {
        thrown = error
      }
      // Woken on every path: a stopped backend would hold up the server's shutdown.
      let pid = try #require(backend.withLock { $0 })
      #expect(kill(pid_t(pid), SIGCONT) == 0)
      #expect((thrown as? StoreError)?.code == .cancelled, "\(String(describing: thrown))")
      // Stopped, the statement ends the backend, whose client has gone; not stopped, it would
      // run to the statement timeout (30 s).
      #expect(
        try await eventually(within: .seconds(20)) {
          try await Self.state(configuration, of: pid) == nil
        },
        "the statement sent before the close still runs at the server"
      )
    }
  }

  /// The state of backend `pid` in `pg_stat_activity`, nil when it has gone.
  static func state(_ configuration: PostgresConfiguration, of pid: Int32) async throws -> String? {
    let rows = try await PostgresTesting.query(
      configuration,
      "SELECT state FROM pg_stat_activity WHERE pid = \(pid)"
    )
    return try rows.first?.decode(String?.self) ?? nil
  }

  @Test("a cancelled call stops its statement at the server")
  func cancellation() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let control = CallControl(deadline: nil)
      let call = Task {
        try await CallControl.$current.withValue(control) {
          try await Self.sleep(store, seconds: 60.1)
        }
      }
      #expect(try await eventually { try await Self.sleepers(configuration, seconds: 60.1) == 1 })
      let cancelled = ContinuousClock.now
      control.cancel()
      let error = try await #require(throws: StoreError.self) { try await call.value }
      #expect(error.code == .cancelled)
      // The statement sleeps for a minute: anything well short of that was stopped.
      #expect(ContinuousClock.now - cancelled < .seconds(15), "stopped, not waited out")
      #expect(
        try await Self.sleepers(configuration, seconds: 60.1) == 0,
        "the statement no longer runs at the server"
      )
    }
  }

  @Test("a cancelled task stops its statement at the server too")
  func taskCancellation() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let task = Task { try await Self.sleep(store, seconds: 60.2) }
      #expect(try await eventually { try await Self.sleepers(configuration, seconds: 60.2) == 1 })
      let cancelled = ContinuousClock.now
      task.cancel()
      let error = try await #require(throws: StoreError.self) { try await task.value }
      #expect(error.code == .cancelled)
      #expect(ContinuousClock.now - cancelled < .seconds(15))
      #expect(try await Self.sleepers(configuration, seconds: 60.2) == 0)
    }
  }

  @Test("a passed deadline stops the statement: DEADLINE_EXCEEDED after about the deadline")
  func deadline() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let started = ContinuousClock.now
      let control = CallControl(deadline: started + .milliseconds(400))
      let error = try await #require(throws: StoreError.self) {
        try await CallControl.$current.withValue(control) {
          try await Self.sleep(store, seconds: 60.3)
        }
      }
      let took = ContinuousClock.now - started
      #expect(error.code == .deadlineExceeded)
      #expect(error == StoreError.deadlinePassed)
      #expect(took >= .milliseconds(350) && took < .seconds(15), "\(took)")
      #expect(try await Self.sleepers(configuration, seconds: 60.3) == 0)
    }
  }
}
