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
/// that prefers an executor (the call's event loop) takes the task's status lock
/// (docs/performance.md, "What the fast path's parts saved"). `interceptUnary` inherits its
/// caller's isolation, and so does `next`: the chain runs without a hop.
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

  /// Runs `next` for one unary call whose whole work runs without suspending (the fast path's
  /// point calls on their event loop, without a task: `Health.Check`, an inline `GetEmployee`),
  /// as `interceptUnary` would for the same call: the same checks, task-local values, statuses,
  /// logs and metrics. Such a call cannot be cancelled while it runs, and ends before any
  /// deadline's timer could fire; a deadline that has passed is still seen by the store's
  /// checks (`CallControl`). `arrived`: when the call arrived; a call that waited for its turn
  /// (a point read queued for the store's lane) counts its duration, and starts its span, from
  /// then, as a call in a task of its own does from the task's start.
  func interceptNow<Output>(
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant,
    next: () throws -> Output
  ) throws -> Output
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

  /// `finishing` for a call that runs without suspending (`interceptNow`).
  func finishingNow<Output>(
    _ body: () throws -> Output,
    finished: (_ error: (any Error)?) -> Void
  ) throws -> Output {
    let output: Output
    do {
      output = try body()
    } catch {
      finished(error)
      throw error
    }
    finished(nil)
    return output
  }
}
