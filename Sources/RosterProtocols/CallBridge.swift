package import GRPCCore
package import RosterServices
package import RosterTransport

/// Where the streamed calls that do not arrive as gRPC enter the server: the Connect
/// protocol's and gRPC-Web's streams (`ConnectStreams`). It is one half of the server's
/// transport (`ServerTransports`), so each such call runs through the same `GRPCServer`, router
/// and interceptors as a gRPC call: grpc-swift's executor, deadlines from `grpc-timeout`,
/// tokens, roles, the per-client stream cap (by the real client's address), logs and metrics.
/// The call's task runs with its `CallWire` bound, so the method's codec reads and writes the
/// messages in the form the call's protocol uses.
///
/// Each call runs in a task of its own inside `listen`, so a graceful shutdown waits for the
/// calls in flight; a call whose client goes away is cancelled through its `BridgedCall`.
///
/// ```swift
/// let bridge = CallBridge()
/// let server = GRPCServer(transport: ServerTransports(http2, bridge), router: router)
/// let call = bridge.accept(stream, wire: wire, peers: peers)  // from the HTTP side
/// ```
package final class CallBridge: ServerTransport, Sendable {
  package typealias Bytes = BufferBytes
  package typealias Inbound = RPCAsyncSequence<RPCRequestPart<BufferBytes>, any Error>
  package typealias Outbound = RPCWriter<RPCResponsePart<BufferBytes>>.Closable

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
    var wire: CallWire
    var peers: UnaryFastPath.Peers
    var call: BridgedCall
  }

  private let accepted: AsyncStream<Accepted>
  private let continuation: AsyncStream<Accepted>.Continuation

  package init() {
    (self.accepted, self.continuation) = AsyncStream.makeStream()
  }

  /// Hands `stream`, whose messages travel as `wire` says, to the server; nil once the server
  /// is shutting down (the caller answers `unavailable`).
  func accept(
    _ stream: RPCStream<Inbound, Outbound>,
    wire: CallWire,
    peers: UnaryFastPath.Peers
  ) -> BridgedCall? {
    let call = BridgedCall()
    let accepted = Accepted(stream: stream, wire: wire, peers: peers, call: call)
    guard case .enqueued = self.continuation.yield(accepted) else {
      return nil
    }
    return call
  }

  package func listen(
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
              await CallWire.$current.withValue(accepted.wire) {
                await streamHandler(accepted.stream, context)
              }
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

  package func beginGracefulShutdown() {
    self.continuation.finish()
  }
}

/// The server's transport: gRPC's (`main`, Roster's HTTP/2 transport) and the Connect protocol's
/// and gRPC-Web's streams (`bridge`), which its connections hand over. One `GRPCServer` listens
/// on both, so every streamed call, whatever its protocol, runs through one router and one
/// interceptor chain.
package struct ServerTransports<Main: ServerTransport>: ServerTransport
where Main.Bytes == BufferBytes {
  package typealias Bytes = BufferBytes

  let main: Main
  let bridge: CallBridge

  package init(_ main: Main, _ bridge: CallBridge) {
    self.main = main
    self.bridge = bridge
  }

  package func listen(
    streamHandler:
      @escaping @concurrent @Sendable (RPCStream<Inbound, Outbound>, ServerContext) async -> Void
  ) async throws {
    try await withThrowingDiscardingTaskGroup { group in
      group.addTask { try await self.bridge.listen(streamHandler: streamHandler) }
      // The main transport's end (a graceful shutdown, or a failure to listen) ends the
      // bridge's: no streamed call can arrive without a connection.
      do {
        try await self.main.listen(streamHandler: streamHandler)
      } catch {
        self.bridge.beginGracefulShutdown()
        throw error
      }
      self.bridge.beginGracefulShutdown()
    }
  }

  /// The server's methods, for the main transport (which reads its streams' descriptors,
  /// kinds included, from them).
  package func configure(context: GRPCServerContext) {
    self.main.configure(context: context)
  }

  package func beginGracefulShutdown() {
    self.main.beginGracefulShutdown()
    self.bridge.beginGracefulShutdown()
  }
}
