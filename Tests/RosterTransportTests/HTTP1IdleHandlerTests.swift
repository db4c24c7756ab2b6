import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import RosterTransport

/// `HTTP1IdleHandler`: an HTTP/1.1 connection with no request in flight closes after the idle
/// time; a request in flight keeps it open however long it runs, and the clock starts again
/// when its response ends.
@Suite("HTTP/1.1 idle connections", .timeLimit(.minutes(10)))
struct HTTP1IdleHandlerTests {
  private static func channel() throws -> EmbeddedChannel {
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandler(HTTP1IdleHandler(maxIdleTime: .seconds(10)))
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    return channel
  }

  @Test("a connection that asks nothing closes after the idle time")
  func idleCloses() throws {
    let channel = try Self.channel()
    channel.embeddedEventLoop.advanceTime(by: .seconds(9))
    #expect(channel.isActive)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
  }

  @Test("a request in flight keeps the connection; its response's end restarts the clock")
  func requestInFlight() throws {
    let channel = try Self.channel()
    let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/x")
    try channel.writeInbound(HTTPServerRequestPart.head(head))
    try channel.writeInbound(HTTPServerRequestPart.end(nil))
    channel.embeddedEventLoop.advanceTime(by: .seconds(60))
    #expect(channel.isActive)
    try channel.writeOutbound(
      HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok))
    )
    try channel.writeOutbound(HTTPServerResponsePart.end(nil))
    channel.embeddedEventLoop.advanceTime(by: .seconds(9))
    #expect(channel.isActive)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
  }
}
