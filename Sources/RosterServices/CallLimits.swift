public import GRPCCore
internal import RosterDomain
internal import RosterProto
internal import RosterStore
internal import Synchronization

/// Binds every call to a `CallControl`, so the store stops a call's work when the call ends:
/// when the client cancels or goes away, when the client's `grpc-timeout` passes, or when the
/// server's default deadline does. gRPC signals the first two through the RPC's cancellation
/// handle, not by cancelling the handler's task, so this forwards that signal to the control.
///
/// Unary calls that bring no deadline get a default one: when it passes, the handler's task
/// is cancelled and the call ends with `DEADLINE_EXCEEDED`. One shared `DeadlineReaper`
/// watches every such call, so a call holds no timer of its own and nothing of it outlives
/// the call (a timer per call stayed, with its memory, until its deadline).
///
/// Streaming calls are exempt from the default: an upload, an import, a long listing or a
/// watch can rightly take longer than any fixed bound (a 1M-row `UpsertEmployees` takes
/// minutes), and they end when their client goes away; `StreamLimitInterceptor` caps how many
/// one client holds.
public struct CallControlInterceptor: CallInterceptor {
  private let deadline: Duration?
  private let reaper = DeadlineReaper()

  /// Ends unary calls without a `grpc-timeout` after `deadline`; nil for no default.
  public init(deadline: Duration?) {
    self.deadline = deadline
  }

  public func begin(_ call: inout CallScope) throws {
    let (limit, end) = try self.deadline(of: call)
    let standbyReads = call.method.standbyReads
    call.control = CallControl(
      deadline: end,
      standbyReads: standbyReads,
      mustSee: standbyReads ? try ChangeTokens.mustSee(call.metadata) : nil
    )
    if let limit, let end {
      call.defaultDeadline = CallScope.DefaultDeadline(end: end, limit: limit, reaper: self.reaper)
    }
  }

  /// A call that the default deadline stopped says so, whatever stopped it: the reaper, or the
  /// store's own check of the same deadline before the reaper's tick (a call that never waits
  /// has no reaper: the store sees its deadline through its `CallControl`).
  public func end(_ call: CallScope, error: inout (any Error)?) {
    guard let ended = error, let deadline = call.defaultDeadline,
      ContinuousClock.now >= deadline.end,
      Self.endedByDeadline(ended)
    else { return }
    error = Self.defaultDeadlineExceeded(deadline.limit)
  }

  /// The task of a call that runs in one of its own: the fast path's `CallTask` first, by its
  /// type, then any other transport's.
  static func callTask(of context: ServerContext) -> (any CallTaskCancelling)? {
    if let callTask = context.transportSpecific as? CallTask { return callTask }
    return context.transportSpecific as? any CallTaskCancelling
  }

  /// A call's deadline: when it ends (the client's `grpc-timeout`, else the default, else
  /// none), and the default's length when the default is what bounds it. A malformed
  /// `grpc-timeout` is refused, as grpc-go refuses it (INTERNAL), rather than taken as none.
  private func deadline(
    of call: CallScope
  ) throws -> (limit: Duration?, end: ContinuousClock.Instant?) {
    let context = call.context
    if let clientTimeout = try call.metadata.firstString("grpc-timeout").map({
      try Self.parseTimeout($0).get()
    }) {
      // From the call's arrival, when the transport tells it: the transport's timer for it
      // started then (the cast only for calls that bring a timeout).
      let arrived =
        (context.transportSpecific as? CallTask)?.arrived
        ?? (context.transportSpecific as? any CallArrival)?.arrived
        ?? ContinuousClock.now
      return (nil, arrived + clientTimeout)
    }
    // A streaming method runs as long as its client keeps it open.
    let limit = call.method.streams ? nil : self.deadline
    return (limit, limit.map { ContinuousClock.now + $0 })
  }

  /// Runs `body` as a child task that the reaper cancels at `end`; a body cancelled that way
  /// ends in `DEADLINE_EXCEEDED`. A second child waits for the reaper's signal, and is woken by
  /// cancellation when the body finishes first, so nothing of the call (no timer, no task, no
  /// reaper entry) outlives it. Structured on purpose: `body` may capture a closure that must
  /// not escape the call (`withoutActuallyEscaping`).
  static func run<T: Sendable>(
    until end: ContinuousClock.Instant,
    limit: Duration,
    reaper: DeadlineReaper,
    _ body: @escaping @Sendable () async throws -> T
  ) async throws -> T {
    let (expiry, entry) = Self.watch(until: end, reaper: reaper)
    defer { reaper.forget(entry) }
    return try await withThrowingTaskGroup(of: T?.self) { group in
      group.addTask { try await body() }
      group.addTask {
        await expiry.wait()
        return nil
      }
      defer { group.cancelAll() }
      do {
        if let first = try await group.next(), let value = first { return value }
      } catch {
        // A cancellation once `end` has passed is the deadline's, whichever child ended first.
        if !(ContinuousClock.now >= end && Self.endedByDeadline(error)) { throw error }
      }
      throw Self.defaultDeadlineExceeded(limit)
    }
  }

  /// `run(until:limit:reaper:_:)` for a call whose transport can cancel the task running it
  /// (`CallTaskCancelling`): `body` runs in the call's own task, which the reaper cancels at
  /// `end`, so no task is spawned; the outcome is the same, `DEADLINE_EXCEEDED` once `end`
  /// has passed. With no such transport (nil: a unary call through `interceptUnary` elsewhere),
  /// only the call's `CallControl` is cancelled at `end`, which stops the store's work.
  static func run<T: Sendable>(
    until end: ContinuousClock.Instant,
    limit: Duration,
    reaper: DeadlineReaper,
    cancelling callTask: (any CallTaskCancelling)?,
    _ body: () async throws -> T
  ) async throws -> T {
    let (expiry, entry) = Self.watch(until: end, reaper: reaper) { callTask?.cancelCallTask() }
    defer { reaper.forget(entry) }
    do {
      let value = try await body()
      if !expiry.fired { return value }
    } catch {
      if !(expiry.fired || ContinuousClock.now >= end && Self.endedByDeadline(error)) {
        throw error
      }
    }
    throw Self.defaultDeadlineExceeded(limit)
  }

  /// Has `reaper` end the current call at `end`: the returned `Expiry` fires, the call's
  /// `CallControl` is cancelled, then `also` runs. The caller forgets the entry when done.
  private static func watch(
    until end: ContinuousClock.Instant,
    reaper: DeadlineReaper,
    also: (@Sendable () -> Void)? = nil
  ) -> (Expiry, entry: Int) {
    let expiry = Expiry()
    let control = CallControl.current
    let entry = reaper.watch(until: end) {
      expiry.fire()
      control?.cancel()
      also?()
    }
    return (expiry, entry)
  }

  private static func defaultDeadlineExceeded(_ limit: Duration) -> RPCError {
    RPCError(
      code: .deadlineExceeded,
      message: "the call brought no deadline and ran past the default of \(limit)"
    )
  }

  /// Whether `error` is how work ends when the call's deadline stops it: a cancellation, or
  /// the store's own check of the same deadline (`CallControl.deadline`), which may come
  /// before the reaper's tick. Either way the call ran past the default deadline, and says so.
  private static func endedByDeadline(_ error: any Error) -> Bool {
    if error is CancellationError { return true }
    if let error = error as? RPCError {
      return error.code == .cancelled || error.code == .deadlineExceeded
    }
    if let error = error as? StoreError {
      return error.code == .cancelled || error.code == .deadlineExceeded
    }
    return false
  }

  /// A `grpc-timeout` value ("100m", "2S", ...) as a duration; nil when malformed.
  public static func timeout(_ text: String) -> Duration? {
    try? Self.parseTimeout(text).get()
  }

  /// A `grpc-timeout` value as a duration, or why it is malformed, as grpc-go reads it: up to
  /// eight digits and one of the units `H M S m u n`. Unlike grpc-go, a sign is refused.
  public static func parseTimeout(_ text: String) -> Result<Duration, RPCError> {
    func malformed(_ why: String) -> Result<Duration, RPCError> {
      .failure(
        RPCError(
          code: .internalError,
          message: "malformed grpc-timeout: \(why): \"\(text.prefix(32))\""
        )
      )
    }
    let utf8 = text.utf8
    guard utf8.count >= 2 else { return malformed("timeout string is too short") }
    guard utf8.count <= 9 else { return malformed("timeout string is too long") }
    let digits = utf8.dropLast()
    guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
      let value = Int64(String(decoding: digits, as: UTF8.self))
    else { return malformed("the value is not a number of up to 8 digits") }
    switch utf8.last! {
    case UInt8(ascii: "H"): return .success(.seconds(value * 3600))
    case UInt8(ascii: "M"): return .success(.seconds(value * 60))
    case UInt8(ascii: "S"): return .success(.seconds(value))
    case UInt8(ascii: "m"): return .success(.milliseconds(value))
    case UInt8(ascii: "u"): return .success(.microseconds(value))
    case UInt8(ascii: "n"): return .success(.nanoseconds(value))
    default: return malformed("timeout unit is not recognized")
    }
  }
}

/// What a transport that runs each call in a task of its own (Roster's unary fast path) puts in
/// `ServerContext.transportSpecific`: a way to cancel that task. With it,
/// `CallControlInterceptor` bounds a call by the default deadline in the call's own task; without
/// it, the handler runs as a child task the interceptor can cancel (two tasks more per call).
public protocol CallTaskCancelling: ServerContext.TransportSpecific {
  /// Cancels the task that runs the call: the interceptors, the handler and the response.
  func cancelCallTask()
}

/// What a transport puts in `ServerContext.transportSpecific` to say when a call arrived, before
/// any timer for its `grpc-timeout` started (grpc-swift's executor's, or the fast path's).
/// `CallControlInterceptor` counts the call's deadline from then, so that timer never fires
/// before the deadline the store checks, and the call it ends answers `DEADLINE_EXCEEDED`.
/// Without it the deadline counts from the interceptor, a little after such a timer started.
public protocol CallArrival: ServerContext.TransportSpecific {
  /// When the call arrived.
  var arrived: ContinuousClock.Instant { get }
}
