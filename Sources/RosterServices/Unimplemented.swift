internal import GRPCCore

/// The status of an RPC whose contract is published but whose handler is not built yet.
func unimplemented(_ method: String) -> RPCError {
  RPCError(code: .unimplemented, message: "\(method) is not implemented yet")
}
