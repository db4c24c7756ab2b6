import NIOCore
import NIOEmbedded
import Testing

@testable import RosterTransport

/// `ConnectionReadPauses` and its handler, on `EmbeddedChannel` with a manual clock: a paused
/// connection's reads are held until the pause ends, then made once; a connection is known by
/// its peer until it closes.
@Suite("Paused reads", .timeLimit(.minutes(10)))
struct ReadPauseTests {
  /// Counts the reads that get past the pausing handler.
  final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var reads = 0

    func read(context: ChannelHandlerContext) {
      self.reads += 1
      context.read()
    }
  }

  static let peer = "ipv4:127.0.0.1:1"

  private static func channel() throws -> (EmbeddedChannel, ReadCounter, ConnectionReadPauses) {
    let channel = EmbeddedChannel()
    let pauses = ConnectionReadPauses()
    try pauses.attach(to: channel, peer: Self.peer)
    // Between the pausing handler and the socket: it sees the reads that get through.
    let counter = ReadCounter()
    try channel.pipeline.syncOperations.addHandler(counter, position: .first)
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    return (channel, counter, pauses)
  }

  @Test("a paused connection's read waits for the pause's end, and is made once")
  func pauseHoldsReads() throws {
    let (channel, counter, pauses) = try Self.channel()
    channel.read()
    #expect(counter.reads == 1)
    pauses.pause(peer: Self.peer, for: .seconds(1))
    channel.embeddedEventLoop.run()
    channel.read()
    channel.read()
    #expect(counter.reads == 1)
    channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
    #expect(counter.reads == 1)
    channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
    #expect(counter.reads == 2)
    channel.read()
    #expect(counter.reads == 3)
  }

  @Test("a longer pause extends a shorter one; a shorter one leaves it")
  func pausesExtend() throws {
    let (channel, counter, pauses) = try Self.channel()
    pauses.pause(peer: Self.peer, for: .seconds(1))
    channel.embeddedEventLoop.run()
    channel.read()
    pauses.pause(peer: Self.peer, for: .seconds(3))
    pauses.pause(peer: Self.peer, for: .milliseconds(10))
    channel.embeddedEventLoop.run()
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(counter.reads == 0)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(counter.reads == 1)
  }

  @Test("a connection is known by its peer until it closes; an unknown peer is ignored")
  func forgottenOnClose() throws {
    let (channel, counter, pauses) = try Self.channel()
    #expect(pauses.count == 1)
    pauses.pause(peer: "ipv4:10.0.0.1:9", for: .seconds(1))
    channel.embeddedEventLoop.run()
    channel.read()
    #expect(counter.reads == 1)
    _ = try channel.finish()
    #expect(pauses.count == 0)
  }
}
