public import GRPCCore

/// An interceptor that also runs a unary call as one async frame: what it does around the
/// call, with the call's whole work (the rest of the chain, the request's decoding and the
/// handler) as `next`, which returns the response message or throws.
///
/// The unary fast path runs its calls through these when every interceptor of the server is
/// one, rather than through `ServerInterceptor.intercept`'s streaming request and response.
/// The outcome is the same: the same checks in the same order, the same task-local values
/// around the handler, the same statuses, logs and metrics. What differs is the cost: grpc-swift
/// declares `intercept` and its `next` without an isolation of their own, so each level of the
/// chain hops executors twice on the way in and twice on the way out, and each hop of a task
/// that prefers an executor (the call's event loop) takes the task's status lock: 42 of the 70
/// executor switches of a `Health.Check` through the four default interceptors
/// (docs/performance.md, "One frame per call"). `interceptUnary` inherits its caller's
/// isolation, and so does `next`: the chain runs without a hop.
///
/// A call ends when `next` returns or throws; the response is serialized after that, so a
/// unary call's recorded duration is its work without the serialization of its reply.
public protocol UnaryServerInterceptor: ServerInterceptor {
  /// Runs `next` for one unary call, as `intercept` would for the same call. What `next`
  /// throws is either passed on or becomes this interceptor's own error, as it would in
  /// `intercept`.
  func interceptUnary<Output: Sendable>(
    metadata: Metadata,
    context: ServerContext,
    next: () async throws -> Output
  ) async throws -> Output
}

extension UnaryServerInterceptor {
  /// Runs `body`, then `finished` with its error, if any, exactly once: the unary form of
  /// `whenFinished`.
  func finishing<Output>(
    _ body: () async throws -> Output,
    finished: (_ error: (any Error)?) -> Void
  ) async throws -> Output {
    let output: Output
    do {
      output = try await body()
    } catch {
      finished(error)
      throw error
    }
    finished(nil)
    return output
  }
}
