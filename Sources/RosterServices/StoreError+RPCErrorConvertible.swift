public import GRPCCore
internal import Logging
public import RosterDomain
internal import RosterStore

// The one place where store failures become gRPC statuses.

extension StoreError: RPCErrorConvertible {
  public var rpcErrorCode: RPCError.Code {
    switch self.code {
    case .notFound: .notFound
    case .alreadyExists: .alreadyExists
    case .invalidArgument: .invalidArgument
    case .outOfRange: .outOfRange
    case .resourceExhausted: .resourceExhausted
    case .unavailable: .unavailable
    case .cancelled: .cancelled
    case .deadlineExceeded: .deadlineExceeded
    default: .internalError
    }
  }

  public var rpcErrorMessage: String { self.message }
}

/// Runs a handler body and turns anything unexpected into `INTERNAL` with a generic message,
/// logging the cause. `RPCError` and `StoreError` pass through with their own status, so no
/// SQL text or stack trace ever reaches a client.
func withStatusMapping<T>(
  _ method: String,
  logger: Logger,
  _ body: () async throws -> T
) async throws -> T {
  do {
    return try await body()
  } catch {
    throw statusError(error, method, logger: logger)
  }
}

/// `withStatusMapping` for a body that never waits.
func withStatusMappingNow<T>(_ method: String, logger: Logger, _ body: () throws -> T) throws -> T {
  do {
    return try body()
  } catch {
    throw statusError(error, method, logger: logger)
  }
}

private func statusError(_ error: any Error, _ method: String, logger: Logger) -> RPCError {
  switch error {
  case let error as RPCError:
    return error
  case let error as StoreError:
    return RPCError(error)
  case let error as any RPCErrorConvertible:
    // A status of its own, such as a request message that does not decode (`GoogleRPCStatus`),
    // thrown while the handler reads a client stream.
    return RPCError(error)
  case is CancellationError:
    return RPCError(code: .cancelled, message: "\(method) was cancelled")
  case _ where CallControl.current?.isCancelled == true:
    // The client went away: writing to its stream failed because it is closed.
    return RPCError(code: .cancelled, message: "\(method) was cancelled")
  default:
    logger.error("\(method) failed", metadata: ["error": "\(String(reflecting: error))"])
    return RPCError(code: .internalError, message: "\(method) failed; see the server log")
  }
}
