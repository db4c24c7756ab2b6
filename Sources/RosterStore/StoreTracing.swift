internal import Synchronization
public import Tracing

/// Spans for the store's own work, children of the span of the call that asked for it: a
/// lane's wait and its read, a write's wait, statements and commit, a PostgreSQL query or
/// transaction, a picture's file I/O.
///
/// Off until the server starts with an exporter (`switchOn`). While off, a read or write pays
/// one relaxed load and makes no span, task-local lookup or clock read. On, spans are made
/// only within a call whose own span records (`Recording`).
///
/// ```swift
/// let rows = try await StoreTracing.withSpan("postgres.query") { try await client.query(q) }
/// ```
public enum StoreTracing {
  private static let on = Atomic<Bool>(false)

  /// Whether spans are recorded.
  public static var isOn: Bool { Self.on.load(ordering: .relaxed) }

  /// Records spans from now on; called once at start, after `InstrumentationSystem.bootstrap`.
  public static func switchOn() {
    Self.on.store(true, ordering: .relaxed)
  }

  /// Marks the context of a call whose span records (it was sampled): the store's spans are
  /// made only under such a context, so a call that is not sampled, or work outside any call,
  /// costs no span at all.
  public enum Recording: ServiceContextKey {
    public typealias Value = Bool
  }

  /// Runs `body` in a span named `name`, a child of the current one, when tracing is on.
  public static func withSpan<T>(
    _ name: String,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> T
  ) async throws -> T {
    guard let context = Self.context else { return try await body() }
    let span = InstrumentationSystem.tracer.startSpan(name, context: context, ofKind: .internal)
    defer { span.end() }
    do {
      return try await ServiceContext.$current.withValue(span.context) { try await body() }
    } catch {
      span.recordError(error)
      span.setStatus(SpanStatus(code: .error))
      throw error
    }
  }

  /// The current context, to carry to work on another thread; nil when tracing is off or the
  /// current call's span does not record.
  public static var context: ServiceContext? {
    guard Self.isOn, let current = ServiceContext.current, current[Recording.self] == true else {
      return nil
    }
    return current
  }

  /// Now, for a span that `record` or `start` will begin at this instant.
  public static var now: DefaultTracerClock.Instant { DefaultTracerClock.now }

  /// Records a span named `name` that began at `start` and ends now, under `context`.
  public static func record(
    _ name: String,
    context: ServiceContext,
    from start: DefaultTracerClock.Instant
  ) {
    InstrumentationSystem.tracer.startSpan(name, context: context, ofKind: .internal, at: start)
      .end()
  }

  /// Starts a span named `name` under `context`, for synchronous work on another thread; the
  /// caller ends it.
  public static func start(_ name: String, context: ServiceContext) -> any Span {
    InstrumentationSystem.tracer.startSpan(name, context: context, ofKind: .internal)
  }
}
