internal import CoreMetrics
internal import GRPCCore
public import Logging
internal import RosterLocks

/// Logs one structured line per RPC when it ends: method, status, duration, peer, and who made
/// it: the authenticated principal (`rpc.principal`, with `rpc.on_behalf_of` when it acted for
/// someone), or on a server without tokens the author from `x-roster-author` if one is set.
/// Streaming calls are logged when their last message is written, so the duration is the
/// whole call's.
///
/// OK calls log at `okLevel` (default `.info`), failed ones at `.notice` or, for `INTERNAL`,
/// `UNKNOWN` and `DATA_LOSS`, `.error`. The `authorization` metadata is never logged.
public struct RequestLogInterceptor: CallInterceptor {
  private let logger: Logger
  private let okLevel: Logger.Level

  /// Logs to `logger`, successful calls at `okLevel`.
  public init(logger: Logger, okLevel: Logger.Level = .info) {
    self.logger = logger
    self.okLevel = okLevel
  }

  public func begin(_ call: inout CallScope) {}

  public func end(_ call: CallScope, error: inout (any Error)?) {
    var who: Logger.Metadata = [:]
    if let principal = call.authenticatedAuthor {
      who["rpc.principal"] = "\(principal)"
      if !call.onBehalfOf.isEmpty { who["rpc.on_behalf_of"] = "\(call.onBehalfOf)" }
    } else if let author = call.metadata.firstString(AuthorInterceptor.metadataKey),
      !author.isEmpty
    {
      who["rpc.author"] = "\(author.prefix(AuthorInterceptor.maximumLength))"
    }
    self.log(error.map(Self.code(of:)), started: call.arrived, who: who, context: call.context)
  }

  /// The line of one call that ended with `code` (nil: OK).
  private func log(
    _ code: RPCError.Code?,
    started: ContinuousClock.Instant,
    who: Logger.Metadata,
    context: ServerContext
  ) {
    let elapsed = ContinuousClock.now - started
    var metadata: Logger.Metadata = [
      "rpc.method": "\(context.descriptor.fullyQualifiedMethod)",
      "rpc.status": "\(code.map(Self.name) ?? "OK")",
      "rpc.duration_us":
        "\(elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000)",
      "rpc.peer": "\(context.remotePeer)",
    ]
    metadata.merge(who) { first, _ in first }
    let level: Logger.Level =
      switch code {
      case nil: self.okLevel
      case .internalError?, .unknown?, .dataLoss?: .error
      default: .notice
      }
    self.logger.log(level: level, "rpc", metadata: metadata)
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
///
/// The instruments of each method and status are made once and kept (a few hundred at most:
/// the registered methods times the status codes), so a call makes none.
public struct RequestMetricsInterceptor: CallInterceptor {
  private let instruments = Instruments()

  public init() {}

  public func begin(_ call: inout CallScope) {}

  public func end(_ call: CallScope, error: inout (any Error)?) {
    self.instruments.record(call, error)
  }

  /// The counter and timer of each method and status, made on first use.
  final class Instruments: Sendable {
    private struct Key: Hashable {
      /// The server's own methods by their index (`MethodFacts`), cheaper to hash than names.
      enum Method: Hashable {
        case index(Int)
        case other(MethodDescriptor)
      }
      var method: Method
      var code: RPCError.Code?
    }
    private let table = Locked<[Key: (Counter, Timer)]>([:])

    /// Counts `call`, which ended with `error` (nil: OK), and its time from its arrival.
    func record(_ call: CallScope, _ error: (any Error)?) {
      let elapsed = ContinuousClock.now - call.arrived
      let (counter, timer) = self.of(
        call.context.descriptor,
        index: call.method.index,
        error.map(RequestLogInterceptor.code(of:))
      )
      counter.increment()
      timer.recordNanoseconds(
        elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
      )
    }

    func of(
      _ method: MethodDescriptor,
      index: Int?,
      _ code: RPCError.Code?
    ) -> (Counter, Timer) {
      let key = Key(method: index.map(Key.Method.index) ?? .other(method), code: code)
      if let found = self.table.withLock({ $0[key] }) { return found }
      let dimensions = [
        ("method", method.fullyQualifiedMethod),
        ("status", code.map(RequestLogInterceptor.name) ?? "OK"),
      ]
      let made = (
        Counter(label: "roster_rpc_requests_total", dimensions: dimensions),
        Timer(label: "roster_rpc_duration_seconds", dimensions: dimensions)
      )
      return self.table.withLock { table in
        if let found = table[key] { return found }
        table[key] = made
        return made
      }
    }
  }
}
