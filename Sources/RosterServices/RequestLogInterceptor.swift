public import GRPCCore
internal import CoreMetrics
public import Logging

/// Logs one structured line per RPC when it ends: method, status, duration, peer, and the
/// author from `x-roster-author` if one is set. Streaming calls are logged when their last
/// message is written, so the duration is the whole call's.
///
/// OK calls log at `okLevel` (default `.info`), failed ones at `.notice` or, for `INTERNAL`,
/// `UNKNOWN` and `DATA_LOSS`, `.error`. The `authorization` metadata is never logged.
public struct RequestLogInterceptor: ServerInterceptor {
  private let logger: Logger
  private let okLevel: Logger.Level

  /// Logs to `logger`, successful calls at `okLevel`.
  public init(logger: Logger, okLevel: Logger.Level = .info) {
    self.logger = logger
    self.okLevel = okLevel
  }

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next: @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    let started = ContinuousClock.now
    let author = request.metadata.firstString(AuthorInterceptor.metadataKey)
    let log: @Sendable (RPCError.Code?) -> Void = { [logger, okLevel] code in
      let elapsed = ContinuousClock.now - started
      var metadata: Logger.Metadata = [
        "rpc.method": "\(context.descriptor.fullyQualifiedMethod)",
        "rpc.status": "\(code.map(Self.name) ?? "OK")",
        "rpc.duration_us": "\(elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000)",
        "rpc.peer": "\(context.remotePeer)",
      ]
      if let author, !author.isEmpty { metadata["rpc.author"] = "\(author.prefix(AuthorInterceptor.maximumLength))" }
      let level: Logger.Level =
        switch code {
        case nil: okLevel
        case .internalError?, .unknown?, .dataLoss?: .error
        default: .notice
        }
      logger.log(level: level, "rpc", metadata: metadata)
    }
    return try await whenFinished(request: request, context: context, next: next) { error in
      log(error.map(Self.code(of:)))
    }
  }

  /// The canonical name of a status code, as in the gRPC spec: `NOT_FOUND`.
  static func name(_ code: RPCError.Code) -> String {
    let names = [
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED",
    ]
    return names.indices.contains(code.rawValue) ? names[code.rawValue] : "\(code)"
  }

  /// The status code a thrown error becomes on the wire.
  static func code(of error: any Error) -> RPCError.Code {
    if let error = error as? RPCError { return error.code }
    if let error = error as? any RPCErrorConvertible { return error.rpcErrorCode }
    if error is CancellationError { return .cancelled }
    return .unknown
  }
}

/// Counts every RPC and records its latency, both by method and status, through
/// swift-metrics: `roster_rpc_requests_total` and `roster_rpc_duration_seconds`.
public struct RequestMetricsInterceptor: ServerInterceptor {
  public init() {}

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next: @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    let started = ContinuousClock.now
    let method = context.descriptor.fullyQualifiedMethod
    return try await whenFinished(request: request, context: context, next: next) { error in
      let elapsed = ContinuousClock.now - started
      let dimensions = [
        ("method", method),
        ("status", error.map { RequestLogInterceptor.name(RequestLogInterceptor.code(of: $0)) } ?? "OK"),
      ]
      Counter(label: "roster_rpc_requests_total", dimensions: dimensions).increment()
      Timer(label: "roster_rpc_duration_seconds", dimensions: dimensions).recordNanoseconds(
        elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
      )
    }
  }
}
