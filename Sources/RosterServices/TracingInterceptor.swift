internal import GRPCCore
internal import RosterStore
internal import Tracing

/// One span per RPC (kind server, named by the method), a child of the caller's span when the
/// request carries a W3C `traceparent` (gRPC metadata, or the HTTP header of a Connect or
/// gRPC-Web call, which becomes metadata). The span lasts until the call's last message is
/// written, carries `rpc.system`, `rpc.service`, `rpc.method` and `rpc.grpc.status_code`, and
/// is marked an error for the codes OpenTelemetry counts as server errors. The handler and
/// the store run in its context, so their spans (`StoreTracing`) are its children.
///
/// Installed only when the server exports traces: without one it is not in the chain at all.
public struct TracingInterceptor: CallInterceptor {
  public init() {}

  public func begin(_ call: inout CallScope) {
    let (span, context) = Self.startSpan(
      metadata: call.metadata,
      context: call.context,
      arrived: call.arrived
    )
    call.span = span
    call.serviceContext = context
  }

  public func end(_ call: CallScope, error: inout (any Error)?) {
    if let span = call.span { Self.end(span, error: error) }
  }

  /// The call's span, a child of the caller's when the metadata carries one, and the context
  /// its handler runs in.
  /// `arrived`: when the call arrived; the span starts then.
  private static func startSpan(
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant
  ) -> (any Span, ServiceContext) {
    let tracer = InstrumentationSystem.tracer
    var parent = ServiceContext.topLevel
    tracer.extract(metadata, into: &parent, using: MetadataExtractor())
    let start = WallInstant(arrived)
    let span = tracer.startSpan(
      context.descriptor.fullyQualifiedMethod,
      context: parent,
      ofKind: .server,
      at: start
    )
    span.attributes["rpc.system"] = "grpc"
    span.attributes["rpc.service"] = context.descriptor.service.fullyQualifiedService
    span.attributes["rpc.method"] = context.descriptor.method
    var recording = span.context
    // The store makes its spans only under a call that is sampled.
    if span.isRecording { recording[StoreTracing.Recording.self] = true }
    return (span, recording)
  }

  /// Ends a call's span with its status.
  private static func end(_ span: any Span, error: (any Error)?) {
    let code = error.map(RequestLogInterceptor.code(of:))
    span.attributes["rpc.grpc.status_code"] = code?.rawValue ?? 0
    if let error, let code, Self.serverErrors.contains(code) {
      span.recordError(error)
      span.setStatus(SpanStatus(code: .error, message: RequestLogInterceptor.name(code)))
    }
    span.end()
  }

  /// The codes that mark a server span an error (OpenTelemetry's gRPC conventions); the rest
  /// are the client's.
  static let serverErrors: Set<RPCError.Code> = [
    .unknown, .deadlineExceeded, .unimplemented, .internalError, .unavailable, .dataLoss,
  ]

  /// Reads propagation headers (`traceparent`, `tracestate`) from request metadata.
  struct MetadataExtractor: Extractor {
    func extract(key: String, from carrier: Metadata) -> String? {
      var values = carrier[stringValues: key].makeIterator()
      return values.next()
    }
  }
}

/// A moment of the monotonic clock, at or before now, on the tracer's (wall) clock.
private struct WallInstant: TracerInstant {
  let nanosecondsSinceEpoch: UInt64

  init(_ moment: ContinuousClock.Instant) {
    let now = DefaultTracerClock.now.nanosecondsSinceEpoch
    let ago = max(.zero, ContinuousClock.now - moment)
    let agoNanoseconds =
      UInt64(ago.components.seconds) * 1_000_000_000
      + UInt64(ago.components.attoseconds / 1_000_000_000)
    self.nanosecondsSinceEpoch = now - min(now, agoNanoseconds)
  }

  static func < (lhs: Self, rhs: Self) -> Bool {
    lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch
  }
}
