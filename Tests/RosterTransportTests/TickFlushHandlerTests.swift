import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@testable import RosterTransport

/// `TickFlushHandler`: flushes within one turn of the event loop reach the socket as one, and a
/// close loses nothing written before it.
@Suite("Flush per loop turn", .timeLimit(.minutes(10)))
struct TickFlushHandlerTests {
  /// Counts the flushes that pass it toward the socket.
  final class FlushCounter: ChannelOutboundHandler {
    typealias OutboundIn = Any
    var flushes = 0
    func flush(context: ChannelHandlerContext) {
      self.flushes += 1
      context.flush()
    }
  }

  private static func channel() throws -> (EmbeddedChannel, FlushCounter) {
    let counter = FlushCounter()
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandler(counter)
    try channel.pipeline.syncOperations.addHandler(TickFlushHandler())
    return (channel, counter)
  }

  @Test("two flushes in one turn reach the socket once, when the queued work has run")
  func flushesInOneTurnJoin() throws {
    let (channel, counter) = try Self.channel()
    channel.write(ByteBuffer(string: "first"), promise: nil)
    channel.flush()
    channel.write(ByteBuffer(string: "second"), promise: nil)
    channel.flush()
    #expect(counter.flushes == 0)
    #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
    channel.embeddedEventLoop.run()
    #expect(counter.flushes == 1)
    #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "first"))
    #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "second"))
    // The next turn's flush is a flush of its own.
    channel.write(ByteBuffer(string: "third"), promise: nil)
    channel.flush()
    channel.embeddedEventLoop.run()
    #expect(counter.flushes == 2)
    #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "third"))
    _ = try channel.finish()
  }

  @Test("over a real socket, a close right after a flush sends what was written first")
  func closeFlushesFirst() async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    // The server writes, flushes and closes in one go as each connection becomes active.
    let server = try await ServerBootstrap(group: group)
      .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHandler(TickFlushHandler())
          try channel.pipeline.syncOperations.addHandler(SayGoodbye())
        }
      }
      .bind(host: "127.0.0.1", port: 0).get()
    let received = group.next().makePromise(of: String.self)
    let client = try await ClientBootstrap(group: group)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHandler(CollectUntilClosed(done: received))
        }
      }
      .connect(to: server.localAddress!).get()
    let text = try await received.futureResult.get()
    try await client.closeFuture.get()
    try await server.close()
    try await group.shutdownGracefully()
    #expect(text == "goodbye")
  }

  /// Writes "goodbye", flushes and closes, in one turn, when the connection is active.
  final class SayGoodbye: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    func channelActive(context: ChannelHandlerContext) {
      context.write(NIOAny(ByteBuffer(string: "goodbye")), promise: nil)
      context.flush()
      context.close(promise: nil)
    }
  }

  /// Collects what arrives until the peer closes.
  final class CollectUntilClosed: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let done: EventLoopPromise<String>
    var text = ""
    init(done: EventLoopPromise<String>) { self.done = done }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
      self.text += String(buffer: self.unwrapInboundIn(data))
    }
    func channelInactive(context: ChannelHandlerContext) {
      self.done.succeed(self.text)
    }
  }
}
