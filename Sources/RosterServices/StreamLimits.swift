internal import CoreMetrics
public import GRPCCore
internal import RosterProto
internal import Synchronization

/// Caps the open `StreamEmployees` and `WatchChanges` streams of each client, so one client
/// cannot tie up every reader. Over the cap → `RESOURCE_EXHAUSTED`.
///
/// A client is its authenticated principal when tokens are on (`Principal.current`, set by
/// `AuthInterceptor`), its peer address otherwise. Behind a proxy every client shares the
/// proxy's address, so the cap is then one for all of them: turn tokens on there.
///
/// A slot is held by a `FinishSignal` (see `whenFinished`), so it comes back on every path:
/// the call completes or fails, is cancelled or reset, loses its connection, or is dropped
/// before its response producer ever runs. `roster_stream_slots_in_use` shows the slots held.
public final class StreamLimitInterceptor: UnaryServerInterceptor, Sendable {
  /// The methods counted: those whose `roster.v1.policy` says `per_client_stream`.
  static let limited: Set<MethodDescriptor> = MethodPolicies.server.perClientStreams
  private let maximum: Int
  /// Open streams per client, and their sum (kept, not summed on every open and close).
  private struct Slots {
    var byClient: [String: Int] = [:]
    var total = 0
  }
  private let open = Mutex(Slots())
  private let inUse: Gauge

  /// Allows `maximumPerClient` open streams per client.
  public convenience init(maximumPerClient: Int) {
    self.init(maximumPerClient: maximumPerClient, inUse: Gauge(label: "roster_stream_slots_in_use"))
  }

  /// As `init(maximumPerClient:)`, showing the slots held on `inUse`.
  init(maximumPerClient: Int, inUse: Gauge) {
    self.maximum = maximumPerClient
    self.inUse = inUse
  }

  /// Slots held now, over all clients.
  public var slotsInUse: Int { self.open.withLock { $0.total } }

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next:
      @concurrent @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    guard Self.limited.contains(context.descriptor) else { return try await next(request, context) }
    let client = try self.admit(context)
    return try await whenFinished(request: request, context: context, next: next) { _ in
      self.release(client)
    }
  }

  /// The limited methods stream, so a unary call is never counted; were one limited, it would
  /// hold its slot while it runs.
  public func interceptUnary<Output: Sendable>(
    metadata: Metadata,
    context: ServerContext,
    next: () async throws -> Output
  ) async throws -> Output {
    guard Self.limited.contains(context.descriptor) else { return try await next() }
    let client = try self.admit(context)
    defer { self.release(client) }
    return try await next()
  }

  public func interceptNow<Output>(
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant,
    next: () throws -> Output
  ) throws -> Output {
    guard Self.limited.contains(context.descriptor) else { return try next() }
    let client = try self.admit(context)
    defer { self.release(client) }
    return try next()
  }

  /// Takes a slot of the call's client, or refuses the call when the client holds them all;
  /// the client, for `release`.
  private func admit(_ context: ServerContext) throws -> String {
    let client = Principal.current.map { "principal:\($0)" } ?? Self.address(of: context.remotePeer)
    let admitted = self.open.withLock { open -> Bool in
      guard open.byClient[client, default: 0] < self.maximum else { return false }
      open.byClient[client, default: 0] += 1
      open.total += 1
      self.inUse.record(open.total)
      return true
    }
    guard admitted else {
      throw RPCError(
        code: .resourceExhausted,
        message:
          "at most \(self.maximum) open StreamEmployees and WatchChanges streams per client; close one first"
      )
    }
    return client
  }

  private func release(_ client: String) {
    self.open.withLock { open in
      open.byClient[client, default: 1] -= 1
      if open.byClient[client]! <= 0 { open.byClient[client] = nil }
      open.total -= 1
      // Under the lock: recorded after it, a release's total and an admission's could reach
      // the gauge in the other order, and it would show slots held that are free.
      self.inUse.record(open.total)
    }
  }

  /// The peer without its port: `ipv4:127.0.0.1:5555` → `ipv4:127.0.0.1`.
  static func address(of peer: String) -> String {
    guard let colon = peer.lastIndex(of: ":"), peer.hasPrefix("ipv") else { return peer }
    return String(peer[..<colon])
  }
}

/// Runs `next`, then calls `finished` exactly once when the call is over: at once if it
/// failed before responding, else when its response producer returns or throws, or, if the
/// producer never runs (the client went away before the response began, and the server
/// dropped it), when the response is dropped (with `CancellationError`). The error, if any, is
/// passed along.
func whenFinished<Input: Sendable, Output: Sendable>(
  request: StreamingServerRequest<Input>,
  context: ServerContext,
  next:
    @Sendable (StreamingServerRequest<Input>, ServerContext) async throws ->
    StreamingServerResponse<Output>,
  finished: @escaping @Sendable ((any Error)?) -> Void
) async throws -> StreamingServerResponse<Output> {
  let signal = FinishSignal(finished)
  var response: StreamingServerResponse<Output>
  do {
    response = try await next(request, context)
  } catch {
    signal.finish(error)
    throw error
  }
  switch response.accepted {
  case .failure(let error):
    signal.finish(error)
  case .success(var contents):
    let producer = contents.producer
    contents.producer = { writer in
      do {
        let trailers = try await producer(writer)
        signal.finish(nil)
        return trailers
      } catch {
        signal.finish(error)
        throw error
      }
    }
    response.accepted = .success(contents)
  }
  return response
}

/// Calls its closure exactly once: on the first `finish`, or when the last reference to it
/// goes (the response that held it was dropped unrun), whichever comes first.
final class FinishSignal: Sendable {
  private let finished: Mutex<(@Sendable ((any Error)?) -> Void)?>

  init(_ finished: @escaping @Sendable ((any Error)?) -> Void) {
    self.finished = Mutex(finished)
  }

  func finish(_ error: (any Error)?) {
    let body = self.finished.withLock { finished in
      defer { finished = nil }
      return finished
    }
    body?(error)
  }

  deinit {
    self.finish(CancellationError())
  }
}
