public import GRPCCore
internal import RosterDomain
internal import RosterLocks
internal import RosterStore
internal import Tracing

/// One step of every call, written once: what it checks and sets before the handler runs
/// (`begin`), and what it records or changes when the call is over (`end`). `CallChain` runs
/// the steps the same way for every call, unary or streamed, in a task or without one.
///
/// ```swift
/// struct Audit: CallInterceptor {
///   func begin(_ call: inout CallScope) throws { ... }   // throw to refuse the call
///   func end(_ call: CallScope, error: inout (any Error)?) { ... }
/// }
/// ```
public protocol CallInterceptor: Sendable {
  /// Before the handler: checks the call (what this throws refuses it, and the steps begun
  /// before this one end with that error) and sets in `call` what the handler runs under.
  func begin(_ call: inout CallScope) throws

  /// After the call, once for each `begin` that returned, innermost first: the error the call
  /// ended with (nil: OK), which this may replace with the one the client should see.
  func end(_ call: CallScope, error: inout (any Error)?)
}

extension CallInterceptor {
  public func end(_ call: CallScope, error: inout (any Error)?) {}
}

/// One call as the interceptors see it: what arrived, and what its handler runs under (bound as
/// task-local values around the handler, and for a streamed call around its response too).
public struct CallScope: Sendable {
  /// The request's metadata.
  public let metadata: Metadata
  /// The method, the peer and the transport's handle.
  public let context: ServerContext
  /// What the server knows of the method, found once for the call.
  public let method: MethodFacts
  /// When the call arrived: a call that waited for its turn counts its duration from then.
  public let arrived: ContinuousClock.Instant
  /// The caller's authenticated principal (`Principal.current`).
  public internal(set) var principal: String?
  /// What the caller may see (`Caller.current`).
  public internal(set) var caller: Caller?
  /// The request's author (`RequestAuthor.current`).
  var author = ""
  /// Whom the author acts for (`RequestAuthor.onBehalfOf`).
  var onBehalfOf = ""
  /// The author the caller's token names, once `AuthInterceptor` has checked it: the static
  /// token's label, or the sign-in token's issuer and subject.
  var authenticatedAuthor: String?
  /// The call's span and its context (`ServiceContext.current`) when it is traced.
  var span: (any Span)?
  var serviceContext: ServiceContext?
  /// What the store checks to stop the call's work (`CallControl.current`).
  var control: CallControl?
  /// The server's default deadline, when it is what bounds the call: the call's task is
  /// cancelled at its end, in the forms that run in a task.
  var defaultDeadline: DefaultDeadline?
  /// The client whose per-client stream slot the call holds.
  var streamSlot: String?

  struct DefaultDeadline: Sendable {
    let end: ContinuousClock.Instant
    let limit: Duration
    let reaper: DeadlineReaper
  }

  init(metadata: Metadata, context: ServerContext, arrived: ContinuousClock.Instant) {
    self.metadata = metadata
    self.context = context
    self.method = MethodFacts.of(context.descriptor)
    self.arrived = arrived
  }

  /// Runs `body` under the call's task-local values; a value the call has none of is not bound.
  func bound<R>(_ body: () throws -> R) rethrows -> R {
    try Self.binding(CallControl.$current, self.control) {
      try Self.binding(Principal.$current, self.principal) {
        try Self.binding(Caller.$current, self.caller) {
          try Self.binding(ServiceContext.$current, self.serviceContext) {
            // Most calls name no author, which is the value already bound.
            if self.author.isEmpty, RequestAuthor.current.isEmpty { return try body() }
            return try RequestAuthor.$current.withValue(self.author) {
              if self.onBehalfOf.isEmpty, RequestAuthor.onBehalfOf.isEmpty { return try body() }
              return try RequestAuthor.$onBehalfOf.withValue(self.onBehalfOf, operation: body)
            }
          }
        }
      }
    }
  }

  /// `bound` for work that suspends, but for the call's control, which `limited` binds with
  /// the cancellation that reaches it.
  func boundAsync<R>(_ body: () async throws -> R) async throws -> R {
    try await Self.binding(Principal.$current, self.principal) {
      try await Self.binding(Caller.$current, self.caller) {
        try await Self.binding(ServiceContext.$current, self.serviceContext) {
          if self.author.isEmpty, RequestAuthor.current.isEmpty { return try await body() }
          return try await RequestAuthor.$current.withValue(self.author) {
            if self.onBehalfOf.isEmpty, RequestAuthor.onBehalfOf.isEmpty { return try await body() }
            return try await RequestAuthor.$onBehalfOf.withValue(self.onBehalfOf, operation: body)
          }
        }
      }
    }
  }

  private static func binding<V: Sendable, R>(
    _ local: TaskLocal<V?>,
    _ value: V?,
    _ body: () throws -> R
  ) rethrows -> R {
    guard let value else { return try body() }
    return try local.withValue(value, operation: body)
  }

  private static func binding<V: Sendable, R>(
    _ local: TaskLocal<V?>,
    _ value: V?,
    _ body: () async throws -> R
  ) async throws -> R {
    guard let value else { return try await body() }
    return try await local.withValue(value, operation: body)
  }

  /// Runs `body` under the call's control until the call ends: the client's cancellation
  /// cancels the control, and the server's default deadline, when it bounds the call, cancels
  /// the call's task (or `body`).
  func limited<R: Sendable>(_ body: @escaping @Sendable () async throws -> R) async throws -> R {
    try await self.controlled(body) { deadline in
      if let callTask = CallControlInterceptor.callTask(of: self.context) {
        return try await CallControlInterceptor.run(
          until: deadline.end,
          limit: deadline.limit,
          reaper: deadline.reaper,
          cancelling: callTask,
          body
        )
      }
      return try await CallControlInterceptor.run(
        until: deadline.end,
        limit: deadline.limit,
        reaper: deadline.reaper,
        body
      )
    }
  }

  /// `limited` for a handler that runs in the call's own task (the unary fast path's), which
  /// needs no task of its own to be stopped.
  func limitedInPlace<R: Sendable>(_ body: () async throws -> R) async throws -> R {
    try await self.controlled(body) { deadline in
      try await CallControlInterceptor.run(
        until: deadline.end,
        limit: deadline.limit,
        reaper: deadline.reaper,
        cancelling: CallControlInterceptor.callTask(of: self.context),
        body
      )
    }
  }

  /// `body` with the call's control bound and cancelled by the client's cancellation, run by
  /// `bounded` when the server's default deadline bounds the call.
  private func controlled<R: Sendable>(
    _ body: () async throws -> R,
    bounded: (DefaultDeadline) async throws -> R
  ) async throws -> R {
    guard let control = self.control else { return try await body() }
    return try await CallControl.$current.withValue(control) {
      try await withRPCCancellationHandler {
        guard let deadline = self.defaultDeadline else { return try await body() }
        return try await bounded(deadline)
      } onCancelRPC: {
        control.cancel()
      }
    }
  }
}

/// The interceptors every call goes through, outermost first, run the one way: each `begin` in
/// order, the handler under what they set, each `end` in reverse. Three entries for the three
/// shapes a call takes (a unary call in a task, one that never waits, a streamed call through
/// `GRPCServer`); the steps are the same in each.
public struct CallChain: ServerInterceptor, Sendable {
  public let interceptors: [any CallInterceptor]

  public init(_ interceptors: [any CallInterceptor]) {
    self.interceptors = interceptors
  }

  /// Runs the begins in order, stopping at the first that refuses the call: how many began,
  /// and the refusal.
  private func begin(_ call: inout CallScope) -> (begun: Int, refusal: (any Error)?) {
    for index in self.interceptors.indices {
      do {
        try self.interceptors[index].begin(&call)
      } catch {
        return (index, error)
      }
    }
    return (self.interceptors.count, nil)
  }

  /// Runs the ends of the `begun` first interceptors, innermost first: the error the call ends
  /// with.
  private func end(_ call: CallScope, begun: Int, _ error: (any Error)?) -> (any Error)? {
    var error = error
    var index = begun
    while index > 0 {
      index -= 1
      self.interceptors[index].end(call, error: &error)
    }
    return error
  }

  /// One unary call in a task: the fast path's, the Connect protocol's and gRPC-Web's. Returns
  /// the handler's output and the reply's headers (`ChangeTokens.replyHeaders`).
  public func run<Output>(
    metadata: Metadata,
    context: ServerContext,
    _ handler: () async throws -> Output
  ) async throws -> (output: Output, headers: Metadata) {
    var call = CallScope(metadata: metadata, context: context, arrived: .now)
    let (begun, refusal) = self.begin(&call)
    return try await call.boundAsync {
      var error = refusal
      var output: Output?
      if error == nil {
        do {
          output = try await call.limitedInPlace { Box(try await handler()) }.value
        } catch let caught {
          error = caught
        }
      }
      if let error = self.end(call, begun: begun, error) { throw error }
      return (output!, ChangeTokens.replyHeaders(call.control))
    }
  }

  /// One unary call whose whole work runs without suspending, on the caller's thread with no
  /// task (the fast path's point calls: on the event loop, or in the store's point-call jobs).
  /// It cannot be cancelled while it runs, and ends before any deadline's timer could fire; a
  /// deadline that has passed is still seen by the store's checks (`CallControl`).
  /// `arrived`: when the call arrived, if it waited for its turn.
  public func runNow<Output>(
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant,
    _ handler: () throws -> Output
  ) throws -> Output {
    var call = CallScope(metadata: metadata, context: context, arrived: arrived)
    let (begun, refusal) = self.begin(&call)
    return try call.bound {
      var error = refusal
      var output: Output?
      if error == nil {
        do {
          output = try handler()
        } catch let caught {
          error = caught
        }
      }
      if let error = self.end(call, begun: begun, error) { throw error }
      return output!
    }
  }

  /// One call through `GRPCServer` (streamed, or unary off the fast path). A unary handler runs
  /// inside `next`, a streamed one inside the response's producer: both run under the call's
  /// values and limits. The ends run when the call is over: at once if it failed before
  /// responding, else when the producer returns or throws, or, if it never runs (the client
  /// went away before the response began, and the server dropped it), when the response is
  /// dropped (with `CancellationError`).
  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next:
      @concurrent @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    let arrived = (context.transportSpecific as? any CallArrival)?.arrived ?? .now
    var begun = CallScope(metadata: request.metadata, context: context, arrived: arrived)
    let (count, refusal) = self.begin(&begun)
    let call = begun
    if let refusal {
      throw call.bound { self.end(call, begun: count, refusal) } ?? refusal
    }
    let signal = FinishSignal { [self] error in
      call.bound { self.end(call, begun: count, error) }
    }
    var response: StreamingServerResponse<Output>
    do {
      response = try await withoutActuallyEscaping(next) { next in
        try await call.boundAsync { try await call.limited { try await next(request, context) } }
      }
    } catch {
      throw signal.finish(error) ?? error
    }
    switch response.accepted {
    case .failure(let error):
      if let ended = signal.finish(error) { response.accepted = .failure(.ending(ended)) }
    case .success(var contents):
      // A unary or client-streaming handler has run by now: its writes' change token.
      contents.metadata.add(contentsOf: ChangeTokens.replyHeaders(call.control))
      let producer = contents.producer
      contents.producer = { writer in
        try await call.boundAsync {
          do {
            let trailers = try await call.limited { try await producer(writer) }
            if let error = signal.finish(nil) { throw error }
            return trailers
          } catch {
            throw signal.finish(error) ?? error
          }
        }
      }
      response.accepted = .success(contents)
    }
    return response
  }
}

extension RPCError {
  /// What any error a call ends with becomes on the wire; `unknown`, the message of an error
  /// that says nothing of its status.
  package static func ending(_ error: any Error, unknown: String = "") -> RPCError {
    if let error = error as? RPCError { return error }
    if let error = error as? any RPCErrorConvertible { return RPCError(error) }
    return RPCError(code: .unknown, message: unknown, cause: error)
  }
}

/// A value carried out of a `@Sendable` closure that only the calling task reads.
private struct Box<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}

/// Calls its closure exactly once: on the first `finish`, or when the last reference to it
/// goes (the response that held it was dropped unrun), whichever comes first.
final class FinishSignal: Sendable {
  private let finished: Locked<(@Sendable ((any Error)?) -> (any Error)?)?>

  init(_ finished: @escaping @Sendable ((any Error)?) -> (any Error)?) {
    self.finished = Locked(finished)
  }

  /// Runs the closure, if it has not run: what it makes of `error`; `error` if it had run.
  func finish(_ error: (any Error)?) -> (any Error)? {
    let body = self.finished.withLock { finished in
      defer { finished = nil }
      return finished
    }
    guard let body else { return error }
    return body(error)
  }

  deinit {
    _ = self.finish(CancellationError())
  }
}
