import Foundation
import GRDB
import RosterLocks
import Synchronization
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// The store's lanes: interrupts on cancellation, deadline and budget; admission; priority.
/// The time limit only catches a hang: the heavy lane's threads run at nice 19, and on a
/// machine busy with every other suite they took over 60 s for 23 trivial reads (a CI run,
/// 2026-11-27).
@Suite("Store lanes", .timeLimit(.minutes(10)))
struct LaneTests {
  /// A statement that runs for minutes: counts a recursive sequence of 500 million. Bounded, so
  /// a broken interrupt fails the suite (by its time limit) without running forever.
  static let endless = """
    WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500000000) SELECT count(*) FROM c
    """

  static func runEndless(_ store: SQLiteStore) async throws -> Int {
    try await store.read(.heavy, statement: true) { db in
      try Int.fetchOne(db, sql: Self.endless) ?? 0
    }
  }

  static func expectStoreError(
    _ code: StoreError.Code,
    mentioning text: String,
    _ body: () async throws -> Int
  ) async {
    do {
      _ = try await body()
      Issue.record("expected \(code), but the body returned")
    } catch let error as StoreError {
      #expect(error.code == code, "\(error)")
      #expect(error.message.contains(text), "\(error)")
    } catch {
      Issue.record("expected a StoreError \(code), got \(error)")
    }
    // No time bound here: the suites run in parallel on two cores. Every statement these
    // tests run is endless or waits behind an endless one, so an answer at all proves it was
    // stopped or refused without waiting; the end-to-end tests time it through the binary.
  }

  @Test("the heavy lane's statements give up the CPU as they run; the interactive lane's do not")
  func heavyYields() async throws {
    // No heavy lane budget: its threads run at the lowest priority, and under a CI run with
    // every other suite busy its statement spent the 30 s default budget waiting for a core.
    try await withTemporaryStore(configure: { $0.heavyLane.budget = nil }) { store async throws in
      // 200,000 steps: milliseconds or more, many times the yield interval, and a progress
      // check every 1,000 steps.
      let count = """
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) SELECT count(*) FROM c
        """
      for lane in [SQLiteStore.ReadKind.heavy, .interactive] {
        let counted = try await store.read(lane, statement: true) { db in
          try Int.fetchOne(db, sql: count) ?? 0
        }
        #expect(counted == 200_000)
      }
      #expect(store.laneStatistics.heavy.yields > 0)
      #expect(store.laneStatistics.interactive.yields == 0)
    }
  }

  @Test("a passed deadline interrupts the running statement")
  func deadline() async throws {
    try await withTemporaryStore { store async throws in
      let control = CallControl(deadline: .now + .milliseconds(200))
      await Self.expectStoreError(.deadlineExceeded, mentioning: "deadline") {
        try await CallControl.$current.withValue(control) { try await Self.runEndless(store) }
      }
      #expect(store.laneStatistics.heavy.interrupted == 1)
      #expect(store.laneStatistics.heavy.running == 0)
    }
  }

  @Test("cancelling the call, or its task, interrupts the running statement")
  func cancellation() async throws {
    // No lane budget: only the cancellation may stop the statement (under a full run's start,
    // the 30 s default budget once ended it before the cancelling task got to run).
    try await withTemporaryStore(configure: { $0.heavyLane.budget = nil }) { store async throws in
      let control = CallControl(deadline: nil)
      // Cancelled once its statement runs (a job cancelled while it waits never runs at all).
      Task {
        while store.laneStatistics.heavy.running < 1 { try await Task.sleep(for: .milliseconds(5)) }
        control.cancel()
      }
      await Self.expectStoreError(.cancelled, mentioning: "cancelled") {
        try await CallControl.$current.withValue(control) { try await Self.runEndless(store) }
      }
      let task = Task { try await Self.runEndless(store) }
      while store.laneStatistics.heavy.running < 1 { try await Task.sleep(for: .milliseconds(5)) }
      task.cancel()
      await Self.expectStoreError(.cancelled, mentioning: "cancelled") {
        try await task.value
      }
      #expect(store.laneStatistics.heavy.interrupted == 2)
    }
  }

  @Test("a query stops at the lane's budget even when its call has no deadline")
  func budget() async throws {
    try await withTemporaryStore(configure: { $0.heavyLane.budget = .milliseconds(200) }) {
      store async throws in
      await Self.expectStoreError(.deadlineExceeded, mentioning: "--max-query-seconds") {
        try await Self.runEndless(store)
      }
    }
  }

  @Test("past the queue, a call is refused at once; a cancelled waiter leaves the queue")
  func admission() async throws {
    // No lane budget: the running query must still run when checked, however long a loaded
    // machine takes to get there (under a CI run, 66 s: the 30 s default budget had ended it).
    let configure: (inout StoreConfiguration) -> Void = {
      $0.heavyLane.width = 1
      $0.heavyLane.queueLimit = 1
      $0.heavyLane.budget = nil
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      let running = Task { try await Self.runEndless(store) }
      while store.laneStatistics.heavy.running < 1 { try await Task.sleep(for: .milliseconds(5)) }
      let waiting = Task { try await Self.runEndless(store) }
      while store.laneStatistics.heavy.queued < 1 { try await Task.sleep(for: .milliseconds(5)) }
      await Self.expectStoreError(.resourceExhausted, mentioning: "retry later") {
        try await Self.runEndless(store)
      }
      #expect(store.laneStatistics.heavy.rejected == 1)
      // The waiter is answered as soon as it is cancelled, while the first still runs.
      waiting.cancel()
      await Self.expectStoreError(.cancelled, mentioning: "cancelled") {
        try await waiting.value
      }
      #expect(store.laneStatistics.heavy.queued == 0)
      #expect(store.laneStatistics.heavy.running == 1)
      running.cancel()
      _ = try? await running.value
      // The lane serves again.
      let one = try await store.read(.heavy, statement: true) { db in
        try Int.fetchOne(db, sql: "SELECT 1")
      }
      #expect(one == 1)
    }
  }

  @Test(
    "a point call runs and reads in the interactive lane, and is refused or cancelled as the lane's jobs are"
  )
  func pointCalls() async throws {
    let configure: (inout StoreConfiguration) -> Void = {
      $0.interactiveLane.width = 1
      $0.interactiveLane.queueLimit = 1
    }
    try await withTemporaryStore(employees: 3, configure: configure) { store async throws in
      let guid = try await store.employeePages(
        fields: .guid,
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 1,
        count: 1
      )[0]
      .employees[0].guid
      /// Runs a point call and waits for it: where it ran and what it read, or why it was stopped.
      func pointCall(_ guid: String) async -> (thread: String?, Result<String, StoreError>) {
        await withCheckedContinuation { continuation in
          _ = store.runPointCall(
            deadline: nil,
            {
              let read = Result { try store.employeeNow(guid: guid, fields: .name).name }
              continuation.resume(
                returning: (StoreLane.currentThreadName(), read.mapError { $0 as! StoreError })
              )
            },
            stopped: { continuation.resume(returning: (nil, .failure($0))) }
          )
        }
      }
      let (thread, read) = await pointCall(guid)
      #expect(thread?.hasPrefix("roster.interac") == true, "\(thread ?? "stopped")")
      #expect(try !read.get().isEmpty)
      let (_, unknown) = await pointCall("00000000-0000-4000-8000-000000000001")
      #expect(throws: StoreError.self) { try unknown.get() }

      // The lane's one thread busy, its one queue place taken by a point call: the next is refused
      // at once; the queued one, cancelled, is stopped without running.
      let running = Task {
        try await store.read(.interactive, statement: true) { db in
          try Int.fetchOne(db, sql: Self.endless)
        }
      }
      while store.laneStatistics.interactive.running < 1 {
        try await Task.sleep(for: .milliseconds(5))
      }
      let ran = Atomic(0)
      let queuedStop = Locked<StoreError?>(nil)
      let cancel = store.runPointCall(
        deadline: nil,
        { ran.add(1, ordering: .relaxed) },
        stopped: { error in queuedStop.withLock { $0 = error } }
      )
      #expect(store.laneStatistics.interactive.queued == 1)
      let refused = Locked<StoreError?>(nil)
      _ = store.runPointCall(
        deadline: nil,
        { ran.add(1, ordering: .relaxed) },
        stopped: { error in refused.withLock { $0 = error } }
      )
      #expect(refused.withLock { $0?.code } == .resourceExhausted)
      cancel()
      #expect(queuedStop.withLock { $0?.code } == .cancelled)
      #expect(store.laneStatistics.interactive.queued == 0)
      running.cancel()
      _ = try? await running.value
      #expect(ran.load(ordering: .relaxed) == 0)
      #expect(try await pointCall(guid).1.get() == read.get())
    }
  }

  @Test(
    "heavy work runs at a lower priority than interactive work, and never on the caller's thread"
  )
  func priority() async throws {
    try await withTemporaryStore { store async throws in
      let heavy = try await store.read(.heavy) { _ in StoreLane.currentNiceness() }
      let interactive = try await store.read(.interactive) { _ in StoreLane.currentNiceness() }
      #expect(heavy == 19)
      #expect(interactive == 0)
      let name = try await store.read(.heavy) { _ in StoreLane.currentThreadName() }
      #expect(name.hasPrefix("roster.heavy"))
      // Heavy threads hand their answers to a thread at the usual priority, so no thread the
      // runtime starts to resume a caller inherits the lower one.
      for _ in 0 ..< 20 {
        _ = try await store.read(.heavy) { _ in 0 }
        #expect(StoreLane.currentNiceness() == 0)
      }
    }
  }

  @Test("a call already past its deadline runs nothing")
  func pastDeadline() async throws {
    try await withTemporaryStore(employees: 3) { store async throws in
      let control = CallControl(deadline: .now - .milliseconds(1))
      await Self.expectStoreError(.deadlineExceeded, mentioning: "deadline") {
        try await CallControl.$current.withValue(control) {
          Int(try await store.countEmployees(filter: EmployeeFilter()))
        }
      }
      #expect(store.laneStatistics.heavy.completed == 0)
    }
  }

  @Test("a call cancelled once its deadline has passed is DEADLINE_EXCEEDED, waiting or checked")
  func cancelledAfterTheDeadline() async throws {
    // gRPC's timer for a client's grpc-timeout cancels the call as a departing client does;
    // the work it stops must still say the deadline ended it (CI once saw CANCELLED).
    let configure: (inout StoreConfiguration) -> Void = {
      $0.heavyLane.width = 1
      $0.heavyLane.budget = nil
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      let running = Task { try await Self.runEndless(store) }
      while store.laneStatistics.heavy.running < 1 { try await Task.sleep(for: .milliseconds(5)) }
      // Queued behind the endless statement: nothing but the cancellation ends its wait. (On a
      // machine so busy that the deadline passes before the job is queued, the lane refuses it
      // as past its deadline: the same answer.)
      let deadline = ContinuousClock.now + .seconds(1)
      let control = CallControl(deadline: deadline)
      let waiting = Task {
        try await CallControl.$current.withValue(control) { try await Self.runEndless(store) }
      }
      while store.laneStatistics.heavy.queued < 1, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(5))
      }
      try await Task.sleep(until: deadline + .milliseconds(10))
      control.cancel()
      await Self.expectStoreError(.deadlineExceeded, mentioning: "deadline") {
        try await waiting.value
      }
      #expect(throws: StoreError.deadlinePassed) { try CallControl.check(control) }
      // Cancelled before its deadline, it is CANCELLED.
      let early = CallControl(deadline: .now + .seconds(60))
      early.cancel()
      #expect(throws: StoreError.callCancelled) { try CallControl.check(early) }
      running.cancel()
      _ = try? await running.value
    }
  }
}
