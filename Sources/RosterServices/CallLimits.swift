public import GRPCCore
internal import RosterProto
internal import Synchronization

/// Gives unary calls that bring no deadline a default one, so a call stuck behind a slow
/// store cannot hold its resources forever. When it passes, the handler's task is cancelled
/// and the call ends with `DEADLINE_EXCEEDED`.
///
/// Streaming calls are exempt: an upload, an import, a long listing or a watch can rightly
/// take longer than any fixed bound (a 1M-row `UpsertEmployees` takes minutes), and they end
/// when their client goes away; `StreamLimitInterceptor` caps how many one client holds.
public struct DefaultDeadlineInterceptor: ServerInterceptor {
  /// The streaming methods, which run as long as their client keeps them open.
  static let exempt: Set<MethodDescriptor> = [
    Roster_V1_Directory.Method.StreamEmployees.descriptor,
    Roster_V1_Directory.Method.UpsertEmployees.descriptor,
    Roster_V1_Directory.Method.WatchChanges.descriptor,
    Roster_V1_Pictures.Method.PutPicture.descriptor,
    Roster_V1_Pictures.Method.GetPicture.descriptor,
    Roster_V1_Analytics.Method.ImportSales.descriptor,
    Grpc_Health_V1_Health.Method.Watch.descriptor,
    Grpc_Reflection_V1_ServerReflection.Method.ServerReflectionInfo.descriptor,
    Grpc_Reflection_V1alpha_ServerReflection.Method.ServerReflectionInfo.descriptor,
  ]
  private let deadline: Duration

  /// Ends calls without a `grpc-timeout` after `deadline`.
  public init(deadline: Duration) {
    self.deadline = deadline
  }

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next: @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    guard !Self.exempt.contains(context.descriptor),
      request.metadata.firstString("grpc-timeout") == nil
    else {
      return try await next(request, context)
    }
    let end = ContinuousClock.now + self.deadline
    let limit = self.deadline
    // A unary handler runs inside `next`, a streaming one inside the producer: bound both.
    var response = try await withoutActuallyEscaping(next) { next in
      try await Self.run(until: end, limit: limit) { try await next(request, context) }
    }
    if case .success(var contents) = response.accepted {
      let producer = contents.producer
      contents.producer = { writer in
        try await Self.run(until: end, limit: limit) { try await producer(writer) }
      }
      response.accepted = .success(contents)
    }
    return response
  }

  /// Runs `body`, cancelling it at `end`; a cancelled body ends in `DEADLINE_EXCEEDED`.
  static func run<T: Sendable>(
    until end: ContinuousClock.Instant,
    limit: Duration,
    _ body: @escaping @Sendable () async throws -> T
  ) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
      group.addTask { try await body() }
      group.addTask {
        try await Task.sleep(until: end, clock: .continuous)
        return nil
      }
      defer { group.cancelAll() }
      do {
        if let first = try await group.next(), let value = first { return value }
      } catch is CancellationError where ContinuousClock.now >= end {
      }
      group.cancelAll()
      throw RPCError(
        code: .deadlineExceeded,
        message: "the call brought no deadline and ran past the default of \(limit)"
      )
    }
  }
}

/// Caps the open `StreamEmployees` and `WatchChanges` streams of each client address, so one
/// client cannot tie up every reader. Over the cap → `RESOURCE_EXHAUSTED`.
public final class StreamLimitInterceptor: ServerInterceptor, Sendable {
  /// The methods counted.
  static let limited: Set<MethodDescriptor> = [
    Roster_V1_Directory.Method.StreamEmployees.descriptor,
    Roster_V1_Directory.Method.WatchChanges.descriptor,
  ]
  private let maximum: Int
  private let open = Mutex<[String: Int]>([:])

  /// Allows `maximumPerClient` open streams per client address.
  public init(maximumPerClient: Int) {
    self.maximum = maximumPerClient
  }

  /// How many streams `client` (as `ipv4:ADDRESS`) has open.
  public func openStreams(of client: String) -> Int {
    self.open.withLock { $0[client] ?? 0 }
  }

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next: @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    guard Self.limited.contains(context.descriptor) else { return try await next(request, context) }
    let client = Self.address(of: context.remotePeer)
    let admitted = self.open.withLock { open in
      guard open[client, default: 0] < self.maximum else { return false }
      open[client, default: 0] += 1
      return true
    }
    guard admitted else {
      throw RPCError(
        code: .resourceExhausted,
        message: "at most \(self.maximum) open StreamEmployees and WatchChanges streams per client; close one first"
      )
    }
    return try await whenFinished(request: request, context: context, next: next) { _ in
      self.open.withLock { open in
        open[client, default: 1] -= 1
        if open[client] == 0 { open[client] = nil }
      }
    }
  }

  /// The peer without its port: `ipv4:127.0.0.1:5555` → `ipv4:127.0.0.1`.
  static func address(of peer: String) -> String {
    guard let colon = peer.lastIndex(of: ":"), peer.hasPrefix("ipv") else { return peer }
    return String(peer[..<colon])
  }
}

/// Runs `next`, then calls `finished` exactly once when the call is over: at once if it
/// failed before responding, else when its response producer returns or throws. The error,
/// if any, is passed along.
func whenFinished<Input: Sendable, Output: Sendable>(
  request: StreamingServerRequest<Input>,
  context: ServerContext,
  next: @Sendable (StreamingServerRequest<Input>, ServerContext) async throws -> StreamingServerResponse<Output>,
  finished: @escaping @Sendable ((any Error)?) -> Void
) async throws -> StreamingServerResponse<Output> {
  var response: StreamingServerResponse<Output>
  do {
    response = try await next(request, context)
  } catch {
    finished(error)
    throw error
  }
  switch response.accepted {
  case .failure(let error):
    finished(error)
  case .success(var contents):
    let producer = contents.producer
    contents.producer = { writer in
      do {
        let trailers = try await producer(writer)
        finished(nil)
        return trailers
      } catch {
        finished(error)
        throw error
      }
    }
    response.accepted = .success(contents)
  }
  return response
}
