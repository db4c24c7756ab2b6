import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import RosterTransport

/// `HTTP1IdleHandler`: an HTTP/1.1 connection with no request in flight closes after the idle
/// time; a request in flight keeps it open however long it runs, and the clock starts again
/// when its response ends. A request's head must arrive within the head timeout of its first
/// byte, also when it begins while the request before it is in flight.
@Suite("HTTP/1.1 idle connections", .timeLimit(.minutes(10)))
struct HTTP1IdleHandlerTests {
  /// The handler and its byte watcher, on a channel where the test plays the decoder: bytes
  /// written inbound reach the watcher, request parts are handed to the handler's context.
  private static func channel() throws -> (EmbeddedChannel, HTTP1IdleHandler) {
    let channel = EmbeddedChannel()
    let handler = HTTP1IdleHandler(maxIdleTime: .seconds(100), headTimeout: .seconds(10))
    try channel.pipeline.syncOperations.addHandler(handler.byteWatcher())
    try channel.pipeline.syncOperations.addHandler(Decoder())
    try channel.pipeline.syncOperations.addHandler(handler)
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    return (channel, handler)
  }

  /// Stands in for NIO's decoder: "H" is a request's head, "E" its end, anything else a
  /// piece of a head still arriving.
  private final class Decoder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
      for byte in self.unwrapInboundIn(data).readableBytesView {
        switch byte {
        case UInt8(ascii: "H"):
          let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/x")
          context.fireChannelRead(self.wrapInboundOut(.head(head)))
        case UInt8(ascii: "E"): context.fireChannelRead(self.wrapInboundOut(.end(nil)))
        default: ()
        }
      }
    }
  }

  private static func respond(_ channel: EmbeddedChannel) throws {
    try channel.writeOutbound(
      HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok))
    )
    try channel.writeOutbound(HTTPServerResponsePart.end(nil))
  }

  @Test("a head that does not arrive within the head timeout of its first byte closes")
  func slowHeadCloses() throws {
    let (channel, _) = try Self.channel()
    for _ in 0 ..< 9 {
      try channel.writeInbound(ByteBuffer(string: "x"))
      channel.embeddedEventLoop.advanceTime(by: .seconds(1))
    }
    #expect(channel.isActive)
    try channel.writeInbound(ByteBuffer(string: "x"))
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
  }

  @Test("the next request's first bytes, sent while one is in flight, start its head's clock")
  func nextRequestTrickled() throws {
    let (channel, _) = try Self.channel()
    try channel.writeInbound(ByteBuffer(string: "HE"))
    channel.embeddedEventLoop.advanceTime(by: .seconds(30))
    try channel.writeInbound(ByteBuffer(string: "x"))
    #expect(channel.isActive)
    try Self.respond(channel)
    channel.embeddedEventLoop.advanceTime(by: .seconds(11))
    #expect(!channel.isActive)
  }

  @Test("a quiet connection after a response waits out the idle time, not the head timeout")
  func quietAfterResponse() throws {
    let (channel, _) = try Self.channel()
    try channel.writeInbound(ByteBuffer(string: "xHxxE"))
    try Self.respond(channel)
    channel.embeddedEventLoop.advanceTime(by: .seconds(99))
    #expect(channel.isActive)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
  }

  @Test("a connection that asks nothing closes after the idle time")
  func idleCloses() throws {
    let (channel, _) = try Self.channel()
    channel.embeddedEventLoop.advanceTime(by: .seconds(99))
    #expect(channel.isActive)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
  }

  @Test("a request in flight keeps the connection; its response's end restarts the clock")
  func requestInFlight() throws {
    let (channel, _) = try Self.channel()
    try channel.writeInbound(ByteBuffer(string: "HE"))
    channel.embeddedEventLoop.advanceTime(by: .seconds(160))
    #expect(channel.isActive)
    try Self.respond(channel)
    channel.embeddedEventLoop.advanceTime(by: .seconds(99))
    #expect(channel.isActive)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
  }
}
