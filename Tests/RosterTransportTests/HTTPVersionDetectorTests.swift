import NIOCore
import NIOEmbedded
import Testing

@testable import RosterTransport

/// `HTTPVersionDetector`: HTTP/2's preface, even split across reads, makes an HTTP/2
/// connection; anything else as soon as it differs, an HTTP/1.1 one; the bytes read go on
/// unchanged; a connection that says nothing is closed.
@Suite("HTTP version detection", .timeLimit(.minutes(10)))
struct HTTPVersionDetectorTests {
  final class Chosen: @unchecked Sendable {
    var versions: [HTTPVersionDetector.Version] = []
  }

  private static func channel() throws -> (EmbeddedChannel, Chosen) {
    let chosen = Chosen()
    let channel = EmbeddedChannel()
    let detector = HTTPVersionDetector(timeout: .seconds(30)) { version, _ in
      chosen.versions.append(version)
    }
    try channel.pipeline.syncOperations.addHandler(detector)
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    return (channel, chosen)
  }

  private static func passedOn(_ channel: EmbeddedChannel) throws -> String {
    var text = ""
    while var buffer = try channel.readInbound(as: ByteBuffer.self) {
      text += buffer.readString(length: buffer.readableBytes) ?? ""
    }
    return text
  }

  @Test("the preface in three reads: HTTP/2, with every byte passed on once it is whole")
  func prefaceSplitAcrossReads() throws {
    let (channel, chosen) = try Self.channel()
    let bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "settings"
    for part in [bytes.prefix(3), bytes.dropFirst(3).prefix(10), bytes.dropFirst(13)] {
      #expect(chosen.versions.isEmpty)
      try channel.writeInbound(ByteBuffer(string: String(part)))
    }
    #expect(chosen.versions == [.http2])
    #expect(try Self.passedOn(channel) == bytes)
    // The detector has left: later bytes pass untouched.
    try channel.writeInbound(ByteBuffer(string: "more"))
    #expect(try Self.passedOn(channel) == "more")
    #expect(chosen.versions == [.http2])
  }

  @Test("a request line: HTTP/1.1 at the first byte that differs from the preface")
  func requestLine() throws {
    let (channel, chosen) = try Self.channel()
    try channel.writeInbound(ByteBuffer(string: "PR"))
    #expect(chosen.versions.isEmpty)
    try channel.writeInbound(ByteBuffer(string: "OPFIND / HTTP/1.1\r\n"))
    #expect(chosen.versions == [.http1])
    #expect(try Self.passedOn(channel) == "PROPFIND / HTTP/1.1\r\n")
  }

  @Test("a connection that sends nothing is closed after the timeout")
  func silentConnectionCloses() throws {
    let (channel, chosen) = try Self.channel()
    channel.embeddedEventLoop.advanceTime(by: .seconds(29))
    #expect(channel.isActive)
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    #expect(!channel.isActive)
    #expect(chosen.versions.isEmpty)
  }
}
