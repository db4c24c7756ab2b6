import Foundation
import Synchronization
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// A lane's refusals for a job's wait (`LaneAdmission`), and its priority while overloaded.
@Suite("Store lanes' admission", .timeLimit(.minutes(10)))
struct LaneAdmissionTests {
  /// Jobs that hold one of a lane's threads until let go, each answering its thread's nice
  /// value: no SQL, so nothing else in the process (another test's SQLite heap limit) can end
  /// them early.
  final class Holder: Sendable {
    let store: SQLiteStore
    let kind: SQLiteStore.ReadKind
    private let letGo = Atomic<Int>(0)

    init(_ store: SQLiteStore, _ kind: SQLiteStore.ReadKind) {
      self.store = store
      self.kind = kind
    }

    var statistics: LaneStatistics {
      self.kind == .heavy ? self.store.laneStatistics.heavy : self.store.laneStatistics.interactive
    }

    /// A job that holds its thread until `letGo(turn)`.
    func hold(_ turn: Int) -> Task<Int32, any Error> {
      Task {
        try await self.store.read(self.kind) { [self] _ in
          while self.letGo.load(ordering: .relaxed) < turn { usleep(1000) }
          return StoreLane.currentNiceness()
        }
      }
    }

    func letGo(_ turn: Int) { self.letGo.store(turn, ordering: .relaxed) }

    func waitUntil(_ condition: (LaneStatistics) -> Bool) async throws {
      while !condition(self.statistics) { try await Task.sleep(for: .milliseconds(5)) }
    }

    /// Teaches the lane (of one thread) that a waiting job waits at least 400 ms for each one
    /// ahead: a first job holds the thread while a second waits 3.2 s behind it (one sample,
    /// weighted an eighth). The second, running once this returns, holds the thread until
    /// `letGo(2)`.
    func teach() async throws -> Task<Int32, any Error> {
      let first = self.hold(1)
      try await self.waitUntil { $0.running >= 1 }
      let second = self.hold(2)
      try await self.waitUntil { $0.queued >= 1 }
      try await Task.sleep(for: .milliseconds(3200))
      self.letGo(1)
      _ = try await first.value
      try await self.waitUntil { $0.queued == 0 }
      return second
    }
  }

  /// The lanes' overload interval in the tests that hold an overload across steps: on a
  /// machine busy with every other suite, one step can wait seconds for a thread (a CI run,
  /// 2026-12-01, saw a 5 s interval pass between two). Its passing is `intervalPasses`'s test;
  /// the others end the overload with `StoreLane.endOverload`.
  static let noTestOutlasts: Duration = .seconds(24 * 3600)

  @Test(
    "a refusal for a job's wait makes the lane overloaded until its interval passes with no other, and each refusal meanwhile extends it"
  )
  func intervalPasses() {
    let start = ContinuousClock.now
    let interval = Duration.seconds(5)
    var admission = LaneAdmission()
    admission.waitPerJobAhead = 400e6
    func refusal(_ deadline: Duration?, at offset: Duration) -> Duration? {
      admission.refusalWait(
        ahead: 0,
        deadline: deadline.map { start + offset + $0 },
        interval: interval,
        atDoor: false,
        now: start + offset
      )
    }
    // Not overloaded, a job with no deadline, or with time to wait, is let in.
    #expect(refusal(nil, at: .zero) == nil)
    #expect(refusal(.seconds(1), at: .zero) == nil)
    #expect(!admission.isOverloaded(at: start))
    // One due before its wait would end is refused, and the lane is overloaded for `interval`.
    #expect(refusal(.milliseconds(300), at: .zero) == .milliseconds(400))
    #expect(admission.isOverloaded(at: start + .seconds(4)))
    #expect(!admission.isOverloaded(at: start + interval))
    // Meanwhile a job that would wait is refused with no deadline, or with time to wait, and
    // each refusal moves the end on.
    #expect(refusal(nil, at: .seconds(3)) == .milliseconds(400))
    #expect(refusal(.seconds(1), at: .seconds(6)) == .milliseconds(400))
    #expect(admission.isOverloaded(at: start + .seconds(10)))
    // Once it ends, they are let in again.
    #expect(refusal(nil, at: .seconds(11)) == nil)
    #expect(refusal(.seconds(1), at: .seconds(11)) == nil)
  }

  @Test(
    "a call that would wait for a thread past its deadline is refused at once, and so is every call that would wait while the lane is overloaded"
  )
  func refusedBeforeItsDeadline() async throws {
    let configure: (inout StoreConfiguration) -> Void = {
      $0.heavyLane.width = 1
      $0.heavyLane.budget = nil
      $0.heavyLane.overloadInterval = Self.noTestOutlasts
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      let lane = Holder(store, .heavy)
      let second = try await lane.teach()
      /// Offers a call due `timeout` after it starts (nil: no deadline) and waits for its
      /// answer: queued instead of refused, nothing would end its wait but a cancellation 10 s
      /// on, an answer other than the refusal. (The deadline counts from inside the call's
      /// task: on a loaded machine a task can start 100 ms late.)
      func expectRefused(_ timeout: Duration?) async {
        let offered = Task {
          let control = timeout.map { CallControl(deadline: .now + $0) }
          return try await CallControl.$current.withValue(control) {
            try await LaneTests.runEndless(store)
          }
        }
        let watchdog = Task {
          try await Task.sleep(for: .seconds(10))
          offered.cancel()
        }
        await LaneTests.expectStoreError(.resourceExhausted, mentioning: "overloaded") {
          try await offered.value
        }
        watchdog.cancel()
      }

      // With the thread busy, a call due in 300 ms is refused, without waiting for it to pass.
      await expectRefused(.milliseconds(300))
      #expect(lane.statistics.rejected == 1)
      // The lane is overloaded now: a call that would wait is refused even with no deadline,
      // and the door (`refusal(dueBy:)`, asked before a call's task starts) refuses one due in
      // a minute.
      await expectRefused(nil)
      #expect(lane.statistics.rejected == 2)
      #expect(store.heavy.refusal(dueBy: .now + .seconds(60))?.code == .resourceExhausted)
      #expect(lane.statistics.rejected == 3)

      // Once the lane has refused nothing for its interval, one due in a minute waits, as does
      // one with no deadline: they may still be served.
      store.heavy.endOverload()
      #expect(store.heavy.refusal(dueBy: .now + .seconds(60)) == nil)
      let later = CallControl(deadline: .now + .seconds(60))
      let patient = Task {
        try await CallControl.$current.withValue(later) { try await LaneTests.runEndless(store) }
      }
      let unbounded = Task { try await LaneTests.runEndless(store) }
      try await lane.waitUntil { $0.queued >= 2 || $0.rejected > 3 }
      #expect(lane.statistics.rejected == 3)
      for task in [patient, unbounded] { task.cancel() }
      lane.letGo(2)
      _ = try await second.value
      for task in [patient, unbounded] { _ = try? await task.value }
    }
  }

  @Test(
    "a wait learned once is unlearned by the jobs that find a thread free, though none waits: a pause of the whole process does not read as overload ever after"
  )
  func unlearnedWait() async throws {
    let configure: (inout StoreConfiguration) -> Void = {
      $0.heavyLane.width = 1
      $0.heavyLane.budget = nil
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      let lane = Holder(store, .heavy)
      // As after a pause: the lane expects 400 ms for each job ahead, and no call was refused.
      let second = try await lane.teach()
      lane.letGo(2)
      _ = try await second.value
      // Then, once no job has waited for a while, jobs that each find the thread idle (none
      // waits, so none teaches a wait).
      try await Task.sleep(for: LaneAdmission.unlearnAfter * 2)
      let idle = { (lane: LaneStatistics) in lane.idle >= 1 || lane.threads == 0 }
      for _ in 0 ..< 24 {
        try await lane.waitUntil(idle)
        _ = try await lane.hold(2).value
      }
      #expect(lane.statistics.rejected == 0)
      // With the thread busy, a call due in 300 ms is let in at the door: the lane no longer
      // expects it to wait 400 ms.
      try await lane.waitUntil(idle)
      let busy = lane.hold(3)
      try await lane.waitUntil { $0.running >= 1 }
      let refusal = store.heavy.refusal(dueBy: .now + .milliseconds(300))
      #expect(refusal == nil, "\(refusal?.message ?? "")")
      lane.letGo(3)
      _ = try await busy.value
    }
  }

  @Test(
    "while the interactive lane is overloaded its threads run below the event loops, and after it at the usual priority again"
  )
  func overloadedPriority() async throws {
    let configure: (inout StoreConfiguration) -> Void = {
      $0.interactiveLane.width = 1
      $0.interactiveLane.overloadInterval = Self.noTestOutlasts
    }
    try await withTemporaryStore(configure: configure) { store async throws in
      let lane = Holder(store, .interactive)
      let second = try await lane.teach()
      // Refused for its deadline, a call makes the lane overloaded; the thread finds it so when
      // the job it runs ends, and lowers its priority for the jobs after.
      #expect(store.interactive.refusal(dueBy: .now + .milliseconds(300)) != nil)
      lane.letGo(2)
      #expect(try await second.value == 0)
      // (Offered while the thread still ends its job, a job would be refused: the lane is
      // overloaded and expects a 400 ms wait.)
      let idle = { (lane: LaneStatistics) in lane.idle >= 1 || lane.threads == 0 }
      try await lane.waitUntil(idle)
      #expect(try await lane.hold(2).value == StoreLane.overloadedNiceness)
      // Once the lane has refused nothing for its interval, the lowered thread ends after its
      // next job (or, idle, by itself), and the job after that runs on a new thread at the
      // usual priority.
      store.interactive.endOverload()
      try await lane.waitUntil(idle)
      _ = try await lane.hold(2).value
      try await lane.waitUntil(idle)
      #expect(try await lane.hold(2).value == 0)
    }
  }
}
