import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import RosterTransport

/// Connection errors (RFC 9113 § 5.4.1) on a real `NIOHTTP2Handler` with `ConnectionManager`
/// behind it, as the transport builds them, fed the client's raw bytes: each ends in GOAWAY
/// with its error code, then the connection closes; a stream error resets its stream and
/// leaves the connection open.
@Suite("Connection errors", .timeLimit(.minutes(10)))
struct ConnectionErrorTests {
  /// A server connection as `RosterHTTP2Transport` makes one, already past the client's
  /// preface and SETTINGS.
  static func connection() throws -> EmbeddedChannel {
    let manager = ConnectionManager(limits: ConnectionManagerTests.withoutKeepalive)
    var configuration = NIOHTTP2Handler.ConnectionConfiguration()
    configuration.headerBlockValidation = .disabled
    let channel = EmbeddedChannel(loop: EmbeddedEventLoop())
    try channel.pipeline.syncOperations.addHandler(
      NIOHTTP2Handler(mode: .server, frameDelegate: manager, connectionConfiguration: configuration)
    )
    try channel.pipeline.syncOperations.addHandler(manager)
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    var preface = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    preface.writeImmutableBuffer(Self.frame(type: 0x4, flags: 0, stream: 0))
    try channel.writeInbound(preface)
    _ = Self.written(channel)
    return channel
  }

  /// One frame's bytes: the 9-byte header, then `payload`.
  static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8] = []) -> ByteBuffer
  {
    var buffer = ByteBuffer()
    let length = payload.count
    buffer.writeBytes([
      UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
      UInt8(truncatingIfNeeded: length),
    ])
    buffer.writeInteger(type)
    buffer.writeInteger(flags)
    buffer.writeInteger(stream & 0x7FFF_FFFF)
    buffer.writeBytes(payload)
    return buffer
  }

  /// A request's HEADERS frame (END_HEADERS, and END_STREAM when `ends`).
  static func headers(stream: UInt32, ends: Bool) -> ByteBuffer {
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    var block = ByteBuffer()
    let request: HPACKHeaders = [
      ":method": "POST", ":scheme": "http", ":path": "/a.B/C", ":authority": "x",
      "content-type": "application/grpc", "te": "trailers",
    ]
    try! encoder.encode(headers: request, to: &block)
    return Self.frame(
      type: 0x1,
      flags: ends ? 0x5 : 0x4,
      stream: stream,
      payload: Array(block.readableBytesView)
    )
  }

  static func data(stream: UInt32, ends: Bool) -> ByteBuffer {
    Self.frame(type: 0x0, flags: ends ? 0x1 : 0, stream: stream, payload: [0, 0, 0, 0, 0])
  }

  static func reset(stream: UInt32) -> ByteBuffer {
    Self.frame(type: 0x3, flags: 0, stream: stream, payload: [0, 0, 0, 8])
  }

  /// The frames the server wrote since the last look, decoded from its bytes.
  static func written(
    _ channel: EmbeddedChannel
  ) -> [(type: UInt8, stream: UInt32, errorCode: UInt32?)] {
    var bytes = ByteBuffer()
    while let part = try? channel.readOutbound(as: IOData.self) {
      if case .byteBuffer(var buffer) = part { bytes.writeBuffer(&buffer) }
    }
    while let part = try? channel.readOutbound(as: ByteBuffer.self) {
      var part = part
      bytes.writeBuffer(&part)
    }
    var frames: [(UInt8, UInt32, UInt32?)] = []
    while bytes.readableBytes >= 9,
      let length = bytes.getInteger(at: bytes.readerIndex, as: UInt32.self).map({ Int($0 >> 8) }),
      bytes.readableBytes >= 9 + length
    {
      let type = bytes.getInteger(at: bytes.readerIndex + 3, as: UInt8.self)!
      let stream = bytes.getInteger(at: bytes.readerIndex + 5, as: UInt32.self)! & 0x7FFF_FFFF
      var code: UInt32?
      if type == 0x7 { code = bytes.getInteger(at: bytes.readerIndex + 13, as: UInt32.self) }
      if type == 0x3 { code = bytes.getInteger(at: bytes.readerIndex + 9, as: UInt32.self) }
      frames.append((type, stream, code))
      bytes.moveReaderIndex(forwardBy: 9 + length)
    }
    return frames
  }

  /// A part of a test's exchange: bytes from the client, or the server ending a stream (its
  /// reply's HEADERS with END_STREAM, as a call's trailers-only reply does).
  enum Step {
    case client(ByteBuffer)
    case serverEnds(UInt32)
  }

  /// Each kind of connection error a client can cause, as h2spec sends them, with the
  /// GOAWAY error code swift-nio-http2 gives it.
  static let connectionErrors: [(name: String, steps: [Step], code: UInt32)] = [
    // h2spec http2/5.1/9: HEADERS on a stream the client has reset.
    (
      "HEADERS on a reset stream",
      [
        .client(Self.headers(stream: 1, ends: false)), .client(Self.reset(stream: 1)),
        .client(Self.headers(stream: 1, ends: true)),
      ], 0x1
    ),
    // h2spec http2/5.1/12: HEADERS on a stream both sides have ended. RFC 9113 § 5.1 names
    // STREAM_CLOSED; swift-nio-http2's state machine chooses the code (PROTOCOL_ERROR).
    (
      "HEADERS on a closed stream",
      [
        .client(Self.headers(stream: 1, ends: true)), .serverEnds(1),
        .client(Self.headers(stream: 1, ends: true)),
      ], 0x1
    ),
    ("DATA on stream 0", [.client(Self.data(stream: 0, ends: false))], 0x1),
    ("DATA on an idle stream", [.client(Self.data(stream: 1, ends: false))], 0x1),
    (
      "a PING of the wrong length",
      [.client(Self.frame(type: 0x6, flags: 0, stream: 0, payload: [0, 0, 0]))], 0x6
    ),
    (
      "a PING on a stream",
      [.client(Self.frame(type: 0x6, flags: 0, stream: 1, payload: Array(repeating: 0, count: 8)))],
      0x1
    ),
    (
      "SETTINGS with an initial window over 2^31-1",
      [
        .client(Self.frame(type: 0x4, flags: 0, stream: 0, payload: [0, 4, 0x80, 0, 0, 0]))
      ], 0x3
    ),
    (
      "a WINDOW_UPDATE of 0 on the connection",
      [.client(Self.frame(type: 0x8, flags: 0, stream: 0, payload: [0, 0, 0, 0]))], 0x1
    ),
    (
      "a WINDOW_UPDATE past 2^31-1 on the connection",
      [
        .client(Self.frame(type: 0x8, flags: 0, stream: 0, payload: [0x7F, 0xFF, 0xFF, 0xFF]))
      ], 0x3
    ),
    (
      "a frame larger than SETTINGS_MAX_FRAME_SIZE",
      [
        .client(
          Self.frame(type: 0x0, flags: 0, stream: 1, payload: Array(repeating: 0, count: 16_385))
        )
      ], 0x6
    ),
    (
      "a stream id going backwards",
      [.client(Self.headers(stream: 5, ends: true)), .client(Self.headers(stream: 3, ends: true))],
      0x1
    ),
  ]

  /// Stream errors: the stream is reset with the code given, and the connection stays.
  static let streamErrors: [(name: String, steps: [Step], code: UInt32)] = [
    // h2spec http2/5.1/6: HEADERS on a stream the client has ended (half-closed remote). RFC
    // 9113 § 5.1 names STREAM_CLOSED; swift-nio-http2 writes this reset itself, with
    // PROTOCOL_ERROR, before any handler of Roster's sees the frame.
    (
      "HEADERS on a half-closed stream",
      [.client(Self.headers(stream: 1, ends: true)), .client(Self.headers(stream: 1, ends: true))],
      0x1
    ),
    // h2spec http2/5.1/5: DATA on a half-closed stream.
    (
      "DATA on a half-closed stream",
      [.client(Self.headers(stream: 1, ends: true)), .client(Self.data(stream: 1, ends: false))],
      0x5
    ),
    // RFC 9113 § 6.9: a WINDOW_UPDATE of 0 on a stream.
    (
      "a WINDOW_UPDATE of 0 on a stream",
      [
        .client(Self.headers(stream: 1, ends: false)),
        .client(Self.frame(type: 0x8, flags: 0, stream: 1, payload: [0, 0, 0, 0])),
      ], 0x1
    ),
  ]

  /// Runs `steps` on `channel`; errors the pipeline passes to its end are what the test looks at
  /// in the bytes written, not here.
  static func run(_ steps: [Step], on channel: EmbeddedChannel) {
    for step in steps {
      // The server may close before the last part is read.
      guard channel.isActive else { break }
      switch step {
      case .client(let bytes):
        _ = try? channel.writeInbound(bytes)
      case .serverEnds(let stream):
        let reply = HTTP2Frame(
          streamID: HTTP2StreamID(Int32(stream)),
          payload: .headers(
            .init(headers: [":status": "200", "grpc-status": "0"], endStream: true)
          )
        )
        channel.writeAndFlush(reply, promise: nil)
      }
    }
    channel.embeddedEventLoop.run()
  }

  @Test(
    "a connection error writes GOAWAY with its code, then closes the connection",
    arguments: 0 ..< Self.connectionErrors.count
  )
  func connectionErrorCloses(_ index: Int) throws {
    let (name, steps, code) = Self.connectionErrors[index]
    let channel = try Self.connection()
    Self.run(steps, on: channel)
    let frames = Self.written(channel)
    let goAways = frames.filter { $0.type == 0x7 }.map(\.errorCode)
    #expect(goAways == [code], "\(name): wrote \(frames)")
    #expect(!channel.isActive, "\(name): the connection is still open after its GOAWAY")
  }

  @Test(
    "a stream error resets its stream and leaves the connection open",
    arguments: 0 ..< Self.streamErrors.count
  )
  func streamErrorKeepsTheConnection(_ index: Int) throws {
    let (name, steps, code) = Self.streamErrors[index]
    let channel = try Self.connection()
    Self.run(steps, on: channel)
    let frames = Self.written(channel)
    #expect(frames.filter { $0.type == 0x3 }.map(\.errorCode) == [code], "\(name): wrote \(frames)")
    #expect(!frames.contains { $0.type == 0x7 }, "\(name): wrote \(frames)")
    #expect(channel.isActive, "\(name)")
    _ = try? channel.finish()
  }
}
