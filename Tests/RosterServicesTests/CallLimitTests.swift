import GRPCCore
import GRPCInProcessTransport
import Logging
import RosterDomain
import RosterLocks
import RosterProto
import Synchronization
import TestSupport
import Testing

@testable import RosterServices

@Suite("Call limits", .timeLimit(.minutes(10)))
struct CallLimitTests {
  @Test(
    "a client gets at most N open streams; a finished one frees its place",
    arguments: TestBackend.available
  )
  func streamsPerClient(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 20) { store async throws in
      try await withInProcessClient(store: store, maxStreamsPerClient: 2) { client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        @Sendable func streamAll() async throws -> Int {
          try await directory.streamEmployees(.with { $0.pageSize = 5 }) { response in
            var count = 0
            for try await page in response.messages { count += page.employees.count }
            return count
          }
        }
        // Streams that finish give their place back: many in a row pass a cap of 2.
        for _ in 0 ..< 5 { #expect(try await streamAll() == 20) }

        // Two watchers hold their places open, and a third stream is refused.
        let (opened, openedContinuation) = AsyncStream.makeStream(of: Void.self)
        try await withThrowingTaskGroup(of: Void.self) { group in
          for _ in 0 ..< 2 {
            group.addTask {
              // Each watch ends with UNAVAILABLE when the feed closes below.
              await expectStatus(.unavailable, mentioning: "shutting down") {
                try await directory.watchChanges(.with { $0.afterToken = "0" }) { response in
                  var first = true
                  for try await _ in response.messages where first {
                    first = false
                    openedContinuation.yield()
                  }
                }
              }
            }
          }
          var ready = 0
          for await _ in opened {
            ready += 1
            if ready == 2 { break }
          }
          await expectStatus(.resourceExhausted, mentioning: "at most 2 open") {
            _ = try await streamAll()
          }
          // Closing the feed ends both watches on the server, which frees their places.
          store.closeChangeFeed()
          try await group.waitForAll()
        }
        #expect(try await streamAll() == 20)
      }
    }
  }

  @Test("past the default deadline, a handler is cancelled and the call is DEADLINE_EXCEEDED")
  func defaultDeadline() async throws {
    let limit = Duration.milliseconds(300)
    let started = ContinuousClock.now
    let pagesRead = Locked(0)
    let reaper = DeadlineReaper()
    await expectStatus(.deadlineExceeded, mentioning: "default of") {
      _ = try await CallControlInterceptor.run(until: started + limit, limit: limit, reaper: reaper)
      {
        // A handler that reads a page every 20 ms and checks for cancellation, as
        // StreamEmployees does: 100 pages would take 2 s.
        for _ in 0 ..< 100 {
          try Task.checkCancellation()
          pagesRead.withLock { $0 += 1 }
          try await Task.sleep(for: .milliseconds(20))
        }
        return 0
      }
    }
    // Cut short: it never read all 100 pages (no timing bound: the machine is shared).
    #expect(pagesRead.withLock { $0 } < 100)
    // A body that finishes in time returns its value, and its own errors pass through. Its
    // default is far off: a loaded machine can stall a call past 300 ms before its body runs
    // (a CI run saw the error below come back as DEADLINE_EXCEEDED).
    let roomy = Duration.seconds(60)
    let value = try await CallControlInterceptor.run(
      until: .now + roomy,
      limit: roomy,
      reaper: reaper
    ) { 42 }
    #expect(value == 42)
    // The call that ended in time left nothing behind: no timer, no entry in the reaper.
    #expect(reaper.watched == 0)
    await expectStatus(.notFound, mentioning: "mine") {
      _ = try await CallControlInterceptor.run(until: .now + roomy, limit: roomy, reaper: reaper) {
        () async throws -> Int in
        throw RPCError(code: .notFound, message: "mine")
      }
    }
  }

  @Test(
    "a handler that stops on a cancellation after the default deadline, before the reaper fires, is DEADLINE_EXCEEDED"
  )
  func cancellationAfterTheDeadline() async throws {
    // The store sees the deadline itself (a statement's progress handler) and stops the call
    // with a cancellation before the reaper's next tick: still the deadline's doing.
    let limit = Duration.milliseconds(50)
    let end = ContinuousClock.now + limit
    let reaper = DeadlineReaper(tick: .seconds(30))
    await expectStatus(.deadlineExceeded, mentioning: "default of") {
      _ = try await CallControlInterceptor.run(until: end, limit: limit, reaper: reaper) {
        () async throws -> Int in
        try await Task.sleep(until: end + .milliseconds(5))
        throw CancellationError()
      }
    }
    // Before the deadline, a cancellation is the handler's own outcome.
    await expectStatus(.cancelled, mentioning: "mine") {
      _ = try await CallControlInterceptor.run(
        until: .now + .seconds(30),
        limit: .seconds(30),
        reaper: reaper
      ) {
        () async throws -> Int in
        throw RPCError(code: .cancelled, message: "mine")
      }
    }
  }

  @Test(
    "a handler's failure after the default deadline, in its response rather than thrown, says it was the default"
  )
  func failureInTheResponseAfterTheDeadline() async throws {
    // grpc-swift's unary adapters carry a handler's error in the response; the store's own
    // check of the deadline ("the call's deadline passed") can come before the reaper's tick.
    let interceptor = CallControlInterceptor(deadline: .milliseconds(100))
    let context = Self.context(nil)
    let response: StreamingServerResponse<Int> = try await CallChain([interceptor]).intercept(
      request: StreamingServerRequest(single: ServerRequest(metadata: [:], message: 0)),
      context: context
    ) { _, _ in
      let end = try #require(CallControl.current?.deadline)
      while ContinuousClock.now < end { try? await Task.sleep(until: end) }
      return StreamingServerResponse(
        error: RPCError(
          code: .deadlineExceeded,
          message: "the call's deadline passed; its query was stopped"
        )
      )
    }
    guard case .failure(let error) = response.accepted else {
      Issue.record("the call succeeded")
      return
    }
    #expect(error.code == .deadlineExceeded)
    #expect(error.message.contains("default of"), "\(error.message)")
  }

  /// A `CountEmployees` call's context, with `transport` as its transport's part.
  static func context(_ transport: (any ServerContext.TransportSpecific)?) -> ServerContext {
    var context = ServerContext(
      descriptor: Roster_V1_Directory.Method.CountEmployees.descriptor,
      remotePeer: "test",
      localPeer: "test",
      cancellation: ServerContext.RPCCancellationHandle()
    )
    context.transportSpecific = transport
    return context
  }

  /// When a call arrived, as Roster's transports tell it.
  struct Arrived: CallArrival {
    let arrived: ContinuousClock.Instant
  }

  @Test("a client's grpc-timeout counts from the call's arrival, when the transport tells it")
  func deadlineFromArrival() async throws {
    // gRPC's timer for the timeout starts when the call arrives; a deadline counted from the
    // interceptor's own clock passed after that timer fired, so the store said CANCELLED.
    let interceptor = CallControlInterceptor(deadline: nil)
    let arrived = ContinuousClock.now - .seconds(1)
    let cases: [((any CallArrival)?, ContinuousClock.Instant?)] = [
      (Arrived(arrived: arrived), arrived + .seconds(5)),
      (nil, nil),
    ]
    for (transport, expected) in cases {
      let context = Self.context(transport)
      let before = ContinuousClock.now
      let seen = Locked<ContinuousClock.Instant?>(nil)
      let response: StreamingServerResponse<Int> = try await CallChain([interceptor]).intercept(
        request: StreamingServerRequest(
          single: ServerRequest(metadata: ["grpc-timeout": "5S"], message: 0)
        ),
        context: context
      ) { _, _ in
        seen.withLock { $0 = CallControl.current?.deadline }
        return StreamingServerResponse(single: ServerResponse(message: 0))
      }
      _ = try response.accepted.get()
      let deadline = try #require(seen.withLock { $0 })
      if let expected {
        #expect(deadline == expected)
      } else {
        #expect(deadline >= before + .seconds(5))
      }
    }
  }

  /// A transport's hold on the task that runs a call, as Roster's unary fast path gives it.
  final class CallTask: CallTaskCancelling {
    let task = Locked<Task<Void, Never>?>(nil)
    let cancels = Atomic<Int>(0)

    func cancelCallTask() {
      self.cancels.add(1, ordering: .relaxed)
      self.task.withLock { $0 }?.cancel()
    }
  }

  /// What one call through `CallControlInterceptor` did.
  final class CallProbe: Sendable {
    let pagesRead = Locked(0)
    let inCallersTask = Locked<Bool?>(nil)
    let thrown = Locked<(any Error)?>(nil)
  }

  /// A call through `interceptor` whose handler reads `pages` pages, one every 20 ms, checking
  /// for cancellation before each, as StreamEmployees does.
  static func call(
    _ interceptor: CallControlInterceptor,
    callTask: CallTask?,
    pages: Int,
    probe: CallProbe
  ) async {
    let caller = withUnsafeCurrentTask { $0?.hashValue }
    let context = Self.context(callTask)
    do {
      let response: StreamingServerResponse<Int> = try await CallChain([interceptor]).intercept(
        request: StreamingServerRequest(single: ServerRequest(metadata: [:], message: 0)),
        context: context
      ) { _, _ in
        probe.inCallersTask.withLock { $0 = withUnsafeCurrentTask { $0?.hashValue } == caller }
        for _ in 0 ..< pages {
          try Task.checkCancellation()
          probe.pagesRead.withLock { $0 += 1 }
          try await Task.sleep(for: .milliseconds(20))
        }
        return StreamingServerResponse(single: ServerResponse(message: pages))
      }
      _ = try response.accepted.get()
    } catch {
      probe.thrown.withLock { $0 = error }
    }
  }

  @Test(
    "when the transport can cancel the call's task, the default deadline runs in that task and cancels it"
  )
  func defaultDeadlineInTheCallsTask() async throws {
    let interceptor = CallControlInterceptor(deadline: .milliseconds(300))

    // Past the deadline: the call's own task is cancelled, and the call is DEADLINE_EXCEEDED.
    let late = CallProbe()
    let callTask = CallTask()
    let task = Task { await Self.call(interceptor, callTask: callTask, pages: 100, probe: late) }
    callTask.task.withLock { $0 = task }
    await task.value
    #expect(late.inCallersTask.withLock { $0 } == true, "the handler ran in a task of its own")
    #expect(callTask.cancels.load(ordering: .relaxed) == 1)
    #expect(late.pagesRead.withLock { $0 } < 100)
    let error = try #require(late.thrown.withLock { $0 } as? RPCError)
    #expect(error.code == .deadlineExceeded)
    #expect(error.message.contains("default of"))

    // In time: the value, and the task is left alone. (A deadline no busy machine reaches:
    // one 20 ms page once missed 300 ms in a loaded CI run.)
    let generous = CallControlInterceptor(deadline: .seconds(60))
    let quick = CallProbe()
    let inTime = CallTask()
    let quickTask = Task { await Self.call(generous, callTask: inTime, pages: 1, probe: quick) }
    inTime.task.withLock { $0 = quickTask }
    await quickTask.value
    #expect(quick.thrown.withLock { $0 } == nil)
    #expect(inTime.cancels.load(ordering: .relaxed) == 0)

    // Without such a transport (grpc-swift's), the handler runs as a task of its own.
    let plain = CallProbe()
    await Self.call(generous, callTask: nil, pages: 1, probe: plain)
    #expect(plain.inCallersTask.withLock { $0 } == false)
    #expect(plain.thrown.withLock { $0 } == nil)
  }

  @Test("a failure once the client has gone away is CANCELLED, not INTERNAL")
  func failureOfACancelledCall() async throws {
    struct Closed: Error {}  // what a write to a reset stream throws
    let logger = Logger(label: "test")
    await expectStatus(.internalError, mentioning: "see the server log") {
      try await withStatusMapping("StreamEmployees", logger: logger) { throw Closed() }
    }
    let control = CallControl(deadline: nil)
    control.cancel()
    await CallControl.$current.withValue(control) {
      await expectStatus(.cancelled, mentioning: "StreamEmployees was cancelled") {
        try await withStatusMapping("StreamEmployees", logger: logger) { throw Closed() }
      }
    }
  }

  @Test("streaming calls are exempt from the default deadline, unary ones are not")
  func exemptions() {
    for method in [
      Roster_V1_Directory.Method.UpsertEmployees.descriptor,
      Roster_V1_Directory.Method.StreamEmployees.descriptor,
      Roster_V1_Pictures.Method.GetPicture.descriptor,
      Roster_V1_Pictures.Method.PutPicture.descriptor,
      Roster_V1_Analytics.Method.ImportSales.descriptor,
    ] {
      #expect(MethodFacts.of(method).streams, "\(method)")
    }
    for method in [
      Roster_V1_Directory.Method.GetEmployee.descriptor,
      Roster_V1_Directory.Method.DeleteEmployees.descriptor,
      Roster_V1_Analytics.Method.AggregateSales.descriptor,
    ] {
      #expect(!MethodFacts.of(method).streams, "\(method)")
    }
  }

  @Test("WatchChanges is exempt from the default deadline", arguments: TestBackend.available)
  func watchOutlivesTheDefaultDeadline(_ backend: TestBackend) async throws {
    try await withTemporaryStore(on: backend, employees: 5) { store async throws in
      try await withInProcessClient(store: store, defaultDeadline: .milliseconds(200)) {
        client async throws in
        let directory = Roster_V1_Directory.Client(wrapping: client)
        // The five seed inserts replay at once; a change made well after the default deadline
        // still arrives live, so the watch was not cut.
        let late = try await directory.watchChanges(.with { $0.afterToken = "0" }) { response in
          var count = 0
          for try await event in response.messages {
            count += 1
            if count == 5 {
              try await Task.sleep(for: .milliseconds(500))
              _ = try await store.createEmployee(
                makeEmployee(name: "Late Larry"),
                context: WriteContext()
              )
            }
            if count == 6 { return event.guid }
          }
          return ""
        }
        #expect(try await store.employee(guid: late, fields: .all).name == "Late Larry")
      }
      store.closeChangeFeed()
    }
  }
}
