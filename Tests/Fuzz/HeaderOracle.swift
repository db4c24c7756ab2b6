import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2

/// swift-nio-http2's verdict on a header block, with its own validation on: whether a server
/// connection takes the block as a request's headers (or, with `trailers`, as the trailers
/// after a well-formed request), rather than resetting the stream or ending the connection.
enum HeaderOracle {
  static let request: [(String, String)] = [
    (":method", "POST"), (":scheme", "http"), (":path", "/a.B/C"), ("te", "trailers"),
  ]

  /// nil when the block cannot be encoded at all.
  static func accepts(_ block: [(String, String)], trailers: Bool) -> Bool? {
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    var bytes = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    bytes.writeBytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
    do {
      if trailers {
        try Self.writeHeaders(Self.request, ends: false, encoder: &encoder, to: &bytes)
      }
      try Self.writeHeaders(block, ends: true, encoder: &encoder, to: &bytes)
    } catch {
      return nil
    }
    var configuration = NIOHTTP2Handler.ConnectionConfiguration()
    configuration.headerBlockValidation = .enabled
    configuration.contentLengthValidation = .disabled
    let loop = EmbeddedEventLoop()
    let channel = EmbeddedChannel(
      handler: NIOHTTP2Handler(mode: .server, connectionConfiguration: configuration),
      loop: loop
    )
    defer { TransportTargets.finish(channel, loop) }
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    _ = try? channel.writeInbound(bytes)
    var written = TransportTargets.Written()
    written.take(channel)
    // A GOAWAY (the HPACK decoder refuses an empty name for the whole connection) or a
    // RST_STREAM is a refusal.
    return !written.frames.contains { $0 == 0x7 || $0 == 0x3 }
  }

  private static func writeHeaders(
    _ block: [(String, String)],
    ends: Bool,
    encoder: inout HPACKEncoder,
    to bytes: inout ByteBuffer
  ) throws {
    var encoded = ByteBuffer()
    try encoder.encode(headers: HPACKHeaders(block), to: &encoded)
    guard encoded.readableBytes <= 16384 else { throw ChannelError.inputClosed }
    let length = encoded.readableBytes
    bytes.writeBytes([
      UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
      UInt8(truncatingIfNeeded: length), 0x1, ends ? 0x5 : 0x4, 0, 0, 0, 1,
    ])
    bytes.writeBuffer(&encoded)
  }
}
