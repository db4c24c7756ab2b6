import Foundation
import GRPCCore
import Logging
import RosterDomain
import RosterLocks
import RosterProto
import Synchronization
import TestSupport
import Testing

@testable import RosterServices

/// Each interceptor, written once, gives a call the same outcome through the chain's three
/// entries: `run` (a unary call in a task, which the unary fast path, Connect and gRPC-Web run),
/// `runNow` (a call that never waits, which the fast path runs without a task) and `intercept`
/// (which `GRPCServer` runs, for streams).
@Suite("Call chain", .timeLimit(.minutes(10)))
struct CallChainTests {
  static let getEmployee = Roster_V1_Directory.Method.GetEmployee.descriptor

  static func context(_ method: MethodDescriptor = Self.getEmployee) -> ServerContext {
    ServerContext(
      descriptor: method,
      remotePeer: "ipv4:127.0.0.1:5555",
      localPeer: "ipv4:127.0.0.1:50051",
      cancellation: ServerContext.RPCCancellationHandle()
    )
  }

  /// What a call through `interceptor`'s chain's `intercept` ends with: the handler's value, or
  /// the error it ended with (thrown, or carried in the response).
  static func streaming<Value: Sendable>(
    _ interceptor: any CallInterceptor,
    metadata: Metadata,
    context: ServerContext,
    _ handler: @escaping @Sendable () async throws -> Value
  ) async -> Result<Value, any Error> {
    await Self.streaming(CallChain([interceptor]), metadata: metadata, context: context, handler)
  }

  /// The same through `chain`.
  static func streaming<Value: Sendable>(
    _ chain: CallChain,
    metadata: Metadata = [:],
    context: ServerContext = Self.context(),
    _ handler: @escaping @Sendable () async throws -> Value
  ) async -> Result<Value, any Error> {
    do {
      let response: StreamingServerResponse<Value> = try await chain.intercept(
        request: StreamingServerRequest(single: ServerRequest(metadata: metadata, message: ())),
        context: context
      ) { _, _ in
        StreamingServerResponse(single: ServerResponse(message: try await handler()))
      }
      let contents = try response.accepted.get()
      let collected = Collected<Value>()
      _ = try await contents.producer(RPCWriter(wrapping: collected))
      return .success(try #require(collected.values.withLock { $0.first }))
    } catch {
      return .failure(error)
    }
  }

  /// The same call through `run`.
  static func unary<Value: Sendable>(
    _ interceptor: any CallInterceptor,
    metadata: Metadata,
    context: ServerContext,
    _ handler: () async throws -> Value
  ) async -> Result<Value, any Error> {
    do {
      return .success(
        try await CallChain([interceptor]).run(metadata: metadata, context: context, handler).output
      )
    } catch {
      return .failure(error)
    }
  }

  /// The same call through `runNow`, on a thread with no task (as the fast path runs it, on its
  /// event loop): the handler checks that it ran without one.
  static func now<Value: Sendable>(
    _ interceptor: any CallInterceptor,
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant = .now,
    _ handler: @escaping @Sendable () throws -> Value
  ) async -> Result<Value, any Error> {
    await withCheckedContinuation { continuation in
      let thread = Thread {
        let outcome = Result<Value, any Error> {
          try CallChain([interceptor]).runNow(
            metadata: metadata,
            context: context,
            arrived: arrived
          ) {
            precondition(withUnsafeCurrentTask { $0 == nil }, "runNow ran its handler in a task")
            return try handler()
          }
        }
        continuation.resume(returning: outcome)
      }
      thread.start()
    }
  }

  /// An outcome as a comparable line: the value, or the status code and message.
  static func describe<Value>(_ outcome: Result<Value, any Error>) -> String {
    switch outcome {
    case .success(let value): "value \(value)"
    case .failure(let error as RPCError): "\(error.code): \(error.message)"
    case .failure(let error): "error \(error)"
    }
  }

  @Test("a token is checked, and its principal set around the handler, in every form")
  func tokens() async throws {
    let reader = TokenTable.makeToken(role: .reader, label: "ann")
    let table = try TokenTable(parsing: reader.line + "\n")
    let interceptor = AuthInterceptor(tokens: table)
    let writeMethod = Roster_V1_Directory.Method.UpdateEmployee.descriptor
    let cases: [(String, Metadata, MethodDescriptor)] = [
      ("no token", [:], Self.getEmployee),
      ("not bearer", ["authorization": "Basic abc"], Self.getEmployee),
      ("unknown token", ["authorization": "Bearer rst_unknown"], Self.getEmployee),
      ("a reader's token for a write", ["authorization": "Bearer \(reader.token)"], writeMethod),
      (
        "a reader's token for a read", ["authorization": "Bearer \(reader.token)"], Self.getEmployee
      ),
      ("no token for health", [:], Grpc_Health_V1_Health.Method.Check.descriptor),
    ]
    var outcomes: [String] = []
    for (name, metadata, method) in cases {
      let handler: @Sendable () throws -> String = { Principal.current ?? "nobody" }
      let streamed = Self.describe(
        await Self.streaming(
          interceptor,
          metadata: metadata,
          context: Self.context(method),
          handler
        )
      )
      let unary = Self.describe(
        await Self.unary(interceptor, metadata: metadata, context: Self.context(method), handler)
      )
      let now = Self.describe(
        await Self.now(interceptor, metadata: metadata, context: Self.context(method), handler)
      )
      #expect(unary == streamed, "\(name)")
      #expect(now == streamed, "\(name)")
      outcomes.append(unary)
    }
    // What each form gave, so equal outcomes are also the right ones.
    #expect(outcomes[0].hasPrefix("unauthenticated"))
    #expect(outcomes[1].hasPrefix("unauthenticated"))
    #expect(outcomes[2] == "unauthenticated: the bearer token is not known to this server")
    #expect(outcomes[3].hasPrefix("permissionDenied"))
    #expect(outcomes[4].hasPrefix("value ") && outcomes[4] != "value nobody")
    #expect(outcomes[5] == "value nobody")
  }

  @Test("the request's author is trimmed, cut and set around the handler, in every form")
  func author() async throws {
    let long = String(repeating: "x", count: 300)
    for value in ["  Ann Lee ", long, ""] {
      let metadata: Metadata = value.isEmpty ? [:] : [AuthorInterceptor.metadataKey: .string(value)]
      let handler: @Sendable () throws -> String = { RequestAuthor.current }
      let streamed = await Self.streaming(
        AuthorInterceptor(),
        metadata: metadata,
        context: Self.context(),
        handler
      )
      let unary = await Self.unary(
        AuthorInterceptor(),
        metadata: metadata,
        context: Self.context(),
        handler
      )
      let now = await Self.now(
        AuthorInterceptor(),
        metadata: metadata,
        context: Self.context(),
        handler
      )
      #expect(Self.describe(unary) == Self.describe(streamed))
      #expect(Self.describe(now) == Self.describe(streamed))
      let expected = String(
        value.trimmingCharacters(in: .whitespaces).prefix(AuthorInterceptor.maximumLength)
      )
      #expect(try unary.get() == expected)
    }
  }

  @Test("a malformed grpc-timeout is refused, and the call's control is set, in every form")
  func callControl() async throws {
    let interceptor = CallControlInterceptor(deadline: .seconds(60))
    let handler: @Sendable () throws -> Bool = { CallControl.current != nil }
    for metadata: Metadata in [["grpc-timeout": "1x"], ["grpc-timeout": "5S"], [:]] {
      let streamed = await Self.streaming(
        interceptor,
        metadata: metadata,
        context: Self.context(),
        handler
      )
      let unary = await Self.unary(
        interceptor,
        metadata: metadata,
        context: Self.context(),
        handler
      )
      let now = await Self.now(interceptor, metadata: metadata, context: Self.context(), handler)
      #expect(Self.describe(unary) == Self.describe(streamed))
      #expect(Self.describe(now) == Self.describe(streamed))
    }
    let refused = await Self.now(
      interceptor,
      metadata: ["grpc-timeout": "1x"],
      context: Self.context(),
      handler
    )
    #expect(Self.describe(refused).hasPrefix("internalError: malformed grpc-timeout"))
    #expect(
      try await Self.unary(interceptor, metadata: [:], context: Self.context(), handler).get()
    )
    #expect(try await Self.now(interceptor, metadata: [:], context: Self.context(), handler).get())
  }

  @Test(
    "a call that never waits sees its deadline through its control, and one the default deadline stopped says so"
  )
  func deadlineNow() async throws {
    let interceptor = CallControlInterceptor(deadline: .milliseconds(50))
    // The store's check of the call's deadline, once it has passed.
    let checked: @Sendable () throws -> Int = {
      let control = try #require(CallControl.current)
      Thread.sleep(forTimeInterval: 0.1)
      try CallControl.check(control)
      return 1
    }
    let stopped = await Self.now(interceptor, metadata: [:], context: Self.context(), checked)
    #expect(
      Self.describe(stopped).hasPrefix(
        "deadlineExceeded: the call brought no deadline and ran past the default"
      )
    )
    // A client's deadline: the store's own error, not the default's.
    let client = await Self.now(
      interceptor,
      metadata: ["grpc-timeout": "20m"],
      context: Self.context(),
      checked
    )
    guard case .failure(let error as StoreError) = client else {
      Issue.record("expected the store's deadline error, got \(Self.describe(client))")
      return
    }
    #expect(error.code == .deadlineExceeded)
    // Within the deadline, the value.
    #expect(
      try await Self.now(
        interceptor,
        metadata: ["grpc-timeout": "5S"],
        context: Self.context(),
        checked
      ).get() == 1
    )
  }

  @Test(
    "past the default deadline, a unary call's own task is cancelled and the call is DEADLINE_EXCEEDED"
  )
  func defaultDeadline() async throws {
    let interceptor = CallControlInterceptor(deadline: .milliseconds(200))
    let pagesRead = Locked(0)
    let callTask = CancelRecorder()
    var context = Self.context()
    context.transportSpecific = callTask
    let task = Task { [context] () async -> Result<Int, any Error> in
      await Self.unary(interceptor, metadata: [:], context: context) { () async throws -> Int in
        // A page every 20 ms until cancelled: 100 pages would take 2 s.
        for _ in 0 ..< 100 {
          try Task.checkCancellation()
          if CallControl.current?.isCancelled == true { throw CancellationError() }
          pagesRead.withLock { $0 += 1 }
          try await Task.sleep(for: .milliseconds(20))
        }
        return 0
      }
    }
    callTask.task.withLock { $0 = task }
    let outcome = await task.value
    #expect(Self.describe(outcome).hasPrefix("deadlineExceeded: the call brought no deadline"))
    #expect(callTask.cancels.load(ordering: .relaxed) == 1)
    #expect(pagesRead.withLock { $0 } < 100)
  }

  @Test("the request log and metrics see a unary call's status, as they see a streaming call's")
  func logAndMetrics() async throws {
    let lines = CollectedLog()
    let logger = Logger(label: "test") { _ in lines }
    let log = RequestLogInterceptor(logger: logger)
    let failing: @Sendable () throws -> Int = { throw RPCError(code: .notFound, message: "gone") }
    _ = await Self.streaming(
      log,
      metadata: [AuthorInterceptor.metadataKey: "ann"],
      context: Self.context(),
      failing
    )
    _ = await Self.unary(
      log,
      metadata: [AuthorInterceptor.metadataKey: "ann"],
      context: Self.context(),
      failing
    )
    _ = await Self.now(
      log,
      metadata: [AuthorInterceptor.metadataKey: "ann"],
      context: Self.context(),
      failing
    )
    let logged = lines.take().map(\.text)
    #expect(logged.count == 3)
    #expect(
      logged.allSatisfy { $0.contains("rpc.status=NOT_FOUND") && $0.contains("rpc.author=ann") }
    )
    #expect(logged.allSatisfy { $0.contains("rpc.method=roster.v1.Directory/GetEmployee") })
    // A call that waited for its turn (a point call queued for the store's lane) counts its
    // duration from its arrival.
    let arrived = ContinuousClock.now - .seconds(2)
    _ = await Self.now(log, metadata: [:], context: Self.context(), arrived: arrived) { 1 }
    let waited = try #require(lines.take().first?.text)
    let micros = waited.split(separator: " ").first { $0.hasPrefix("rpc.duration_us=") }.flatMap {
      Int($0.dropFirst(16))
    }
    #expect((micros ?? 0) >= 2_000_000, "\(waited)")
    let metrics = RequestMetricsInterceptor()
    let counted = await Self.unary(metrics, metadata: [:], context: Self.context()) { 7 }
    #expect(try counted.get() == 7)
    #expect(try await Self.now(metrics, metadata: [:], context: Self.context()) { 8 }.get() == 8)
  }

}

/// The messages a producer writes.
private final class Collected<Value: Sendable>: RPCWriterProtocol, Sendable {
  let values = Locked<[Value]>([])
  func write(_ element: Value) async throws { self.values.withLock { $0.append(element) } }
  func write(contentsOf elements: some Sequence<Value>) async throws {
    for element in elements { try await self.write(element) }
  }
}

/// A transport's way to cancel the call's task, counting the cancels.
private final class CancelRecorder: CallTaskCancelling, Sendable {
  let cancels = Atomic(0)
  let task = Locked<Task<Result<Int, any Error>, Never>?>(nil)
  func cancelCallTask() {
    self.cancels.add(1, ordering: .relaxed)
    self.task.withLock { $0 }?.cancel()
  }
}
