import Foundation
import GRDB
import Synchronization
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// A turn that jobs holding a lane's thread wait for.
private final class Gate: Sendable {
  let turn = Atomic<Int>(0)
}

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
    "a call that would wait for a thread past its deadline is refused at once, and so is every call that would wait while the lane is overloaded"
  )
  func refusedBeforeItsDeadline() async throws {
    let configure: (inout StoreConfiguration) -> Void = {
      $0.heavyLane.width = 1
      $0.heavyLane.budget = nil
      $0.heavyLane.overloadInterval = .seconds(5)
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      // Jobs that hold the lane's thread until let go: no SQL, so nothing else in the process
      // (another test's SQLite heap limit) can end them early.
      let letGo = Gate()
      func hold(_ turn: Int) -> Task<Int, any Error> {
        Task {
          try await store.read(.heavy) { _ in
            while letGo.turn.load(ordering: .relaxed) < turn { usleep(1000) }
            return turn
          }
        }
      }
      let first = hold(1)
      while store.laneStatistics.heavy.running < 1 { try await Task.sleep(for: .milliseconds(5)) }
      // A job that waits at least 1.6 s behind it teaches the lane that a waiting job waits
      // that long for each one ahead: after this one wait, its estimate is at least 200 ms.
      let second = hold(2)
      while store.laneStatistics.heavy.queued < 1 { try await Task.sleep(for: .milliseconds(5)) }
      try await Task.sleep(for: .milliseconds(1600))
      letGo.turn.store(1, ordering: .relaxed)
      #expect(try await first.value == 1)
      while store.laneStatistics.heavy.queued > 0 { try await Task.sleep(for: .milliseconds(5)) }
      /// Offers a call and waits for its answer: queued instead of refused, nothing would end
      /// its wait but a cancellation 10 s on, an answer other than the refusal.
      func expectRefused(_ control: CallControl?) async {
        let offered = Task {
          try await CallControl.$current.withValue(control) { try await Self.runEndless(store) }
        }
        let watchdog = Task {
          try await Task.sleep(for: .seconds(10))
          offered.cancel()
        }
        await Self.expectStoreError(.resourceExhausted, mentioning: "overloaded") {
          try await offered.value
        }
        watchdog.cancel()
      }

      // With the thread busy, a call due in 100 ms is refused, without waiting for it to pass.
      await expectRefused(CallControl(deadline: .now + .milliseconds(100)))
      #expect(store.laneStatistics.heavy.rejected == 1)
      // The lane is overloaded now: a call that would wait is refused even with no deadline,
      // and the door (`refusal(dueBy:)`, asked before a call's task starts) refuses one due in
      // a minute.
      await expectRefused(nil)
      #expect(store.laneStatistics.heavy.rejected == 2)
      #expect(store.heavy.refusal(dueBy: .now + .seconds(60))?.code == .resourceExhausted)
      #expect(store.laneStatistics.heavy.rejected == 3)

      // Once the lane has refused nothing for its interval, one due in a minute waits, as does
      // one with no deadline: they may still be served.
      try await Task.sleep(for: .seconds(5))
      #expect(store.heavy.refusal(dueBy: .now + .seconds(60)) == nil)
      let later = CallControl(deadline: .now + .seconds(60))
      let patient = Task {
        try await CallControl.$current.withValue(later) { try await Self.runEndless(store) }
      }
      let unbounded = Task { try await Self.runEndless(store) }
      while store.laneStatistics.heavy.queued < 2 { try await Task.sleep(for: .milliseconds(5)) }
      #expect(store.laneStatistics.heavy.rejected == 3)
      for task in [patient, unbounded] { task.cancel() }
      letGo.turn.store(2, ordering: .relaxed)
      #expect(try await second.value == 2)
      for task in [patient, unbounded] { _ = try? await task.value }
    }
  }

  @Test(
    "while the interactive lane is overloaded its threads run below the event loops, and after it at the usual priority again"
  )
  func overloadedPriority() async throws {
    let configure: (inout StoreConfiguration) -> Void = {
      $0.interactiveLane.width = 1
      $0.interactiveLane.overloadInterval = .seconds(5)
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      let letGo = Gate()
      func hold(_ turn: Int) -> Task<Int32, any Error> {
        Task {
          try await store.read(.interactive) { _ in
            while letGo.turn.load(ordering: .relaxed) < turn { usleep(1000) }
            return StoreLane.currentNiceness()
          }
        }
      }
      // As in `refusedBeforeItsDeadline`: a job that waited 1.6 s teaches the lane its wait.
      let first = hold(1)
      while store.laneStatistics.interactive.running < 1 {
        try await Task.sleep(for: .milliseconds(5))
      }
      let second = hold(2)
      while store.laneStatistics.interactive.queued < 1 {
        try await Task.sleep(for: .milliseconds(5))
      }
      try await Task.sleep(for: .milliseconds(1600))
      letGo.turn.store(1, ordering: .relaxed)
      #expect(try await first.value == 0)
      while store.laneStatistics.interactive.queued > 0 {
        try await Task.sleep(for: .milliseconds(5))
      }
      // Refused for its deadline, a call makes the lane overloaded; the thread finds it so when
      // the job it runs ends, and lowers its priority for the jobs after.
      #expect(store.interactive.refusal(dueBy: .now + .milliseconds(100)) != nil)
      letGo.turn.store(2, ordering: .relaxed)
      #expect(try await second.value == 0)
      // (Offered while the thread still ends its job, a job would be refused: the lane is
      // overloaded and expects a 200 ms wait.)
      func idle() async throws {
        while store.laneStatistics.interactive.idle < 1,
          store.laneStatistics.interactive.threads > 0
        {
          try await Task.sleep(for: .milliseconds(5))
        }
      }
      try await idle()
      #expect(try await hold(2).value == StoreLane.overloadedNiceness)
      // Once the lane has refused nothing for its interval, the lowered thread ends after its
      // next job (or, idle, by itself), and the job after that runs on a new thread at the
      // usual priority.
      try await Task.sleep(for: .seconds(5))
      try await idle()
      _ = try await hold(2).value
      try await idle()
      #expect(try await hold(2).value == 0)
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
      let queuedStop = Mutex<StoreError?>(nil)
      let cancel = store.runPointCall(
        deadline: nil,
        { ran.add(1, ordering: .relaxed) },
        stopped: { error in queuedStop.withLock { $0 = error } }
      )
      #expect(store.laneStatistics.interactive.queued == 1)
      let refused = Mutex<StoreError?>(nil)
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
