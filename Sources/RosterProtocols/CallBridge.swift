internal import GRPCCore
internal import RosterServices
internal import RosterTransport

/// The server transport of the streamed calls that do not arrive as gRPC: the Connect
/// protocol's and gRPC-Web's streams (`ConnectStreams`). A `GRPCServer` of its own listens on
/// it, with the same services and interceptors as the HTTP/2 server's, so each such call runs
/// exactly as a gRPC call does: grpc-swift's executor, deadlines from `grpc-timeout`,
/// tokens, roles, the per-client stream cap (by the real client's address), logs and metrics.
///
/// Each call runs in a task of its own inside `listen`, so a graceful shutdown waits for the
/// calls in flight; a call whose client goes away is cancelled through its `BridgedCall`.
///
/// ```swift
/// let bridge = CallBridge()
/// let server = GRPCServer(transport: bridge, services: services, interceptors: interceptors)
/// let call = bridge.accept(stream, peers: peers)  // from the HTTP side
/// ```
package final class CallBridge: ServerTransport, Sendable {
  typealias Bytes = BufferBytes
  typealias Inbound = RPCAsyncSequence<RPCRequestPart<BufferBytes>, any Error>
  typealias Outbound = RPCWriter<RPCResponsePart<BufferBytes>>.Closable

  /// One accepted call, to cancel when its client goes away.
  final class BridgedCall: Sendable {
    fileprivate let handle = CallCancellation()
    fileprivate let callTask = CallTask(arrived: .now)

    /// Cancels the call: its handler sees the RPC cancelled, and its task is cancelled.
    func cancel() {
      self.handle.cancel()
      self.callTask.cancelCallTask()
    }
  }

  private struct Accepted: Sendable {
    var stream: RPCStream<Inbound, Outbound>
    var peers: UnaryFastPath.Peers
    var call: BridgedCall
  }

  private let accepted: AsyncStream<Accepted>
  private let continuation: AsyncStream<Accepted>.Continuation

  init() {
    (self.accepted, self.continuation) = AsyncStream.makeStream()
  }

  /// Hands `stream` to the server; nil once the server is shutting down (the caller answers
  /// `unavailable`).
  func accept(_ stream: RPCStream<Inbound, Outbound>, peers: UnaryFastPath.Peers) -> BridgedCall? {
    let call = BridgedCall()
    guard
      case .enqueued = self.continuation.yield(Accepted(stream: stream, peers: peers, call: call))
    else {
      return nil
    }
    return call
  }

  func listen(
    streamHandler:
      @escaping @concurrent @Sendable (RPCStream<Inbound, Outbound>, ServerContext) async -> Void
  ) async throws {
    await withDiscardingTaskGroup { group in
      for await accepted in self.accepted {
        group.addTask {
          let task = Task {
            await withServerContextRPCCancellationHandle { handle in
              accepted.call.handle.attach(handle)
              var context = ServerContext(
                descriptor: accepted.stream.descriptor,
                remotePeer: accepted.peers.remote,
                localPeer: accepted.peers.local,
                cancellation: handle
              )
              context.transportSpecific = accepted.call.callTask
              await streamHandler(accepted.stream, context)
            }
          }
          accepted.call.callTask.task.attach(task)
          await withTaskCancellationHandler {
            await task.value
          } onCancel: {
            accepted.call.cancel()
          }
        }
      }
    }
  }

  func beginGracefulShutdown() {
    self.continuation.finish()
  }
}
