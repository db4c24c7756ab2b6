import GRPCCore
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2

@testable import RosterTransport

/// Roster's HTTP/2 connection handling, its request-head check and its gRPC message reading.
enum TransportTargets {
  /// A client's bytes after its preface, in pieces, to `NIOHTTP2Handler` with
  /// `ConnectionManager` behind it as the transport builds them. What must hold: the server
  /// writes a bounded amount for what it reads, and a connection error (GOAWAY with an error
  /// code) closes the connection.
  static func connection(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let limits = ConnectionManager.Limits(
      maxIdleTime: .seconds(60),
      maxAge: .seconds(600),
      maxGraceTime: .seconds(10),
      keepaliveTime: .seconds(30),
      keepaliveTimeout: .seconds(5),
      allowKeepaliveWithoutCalls: false,
      minPingIntervalWithoutCalls: .minutes(5)
    )
    let manager = ConnectionManager(limits: limits)
    var configuration = NIOHTTP2Handler.ConnectionConfiguration()
    configuration.headerBlockValidation = .disabled
    let loop = EmbeddedEventLoop()
    let channel = EmbeddedChannel(loop: loop)
    defer { Self.finish(channel, loop) }
    try! channel.pipeline.syncOperations.addHandler(
      NIOHTTP2Handler(mode: .server, frameDelegate: manager, connectionConfiguration: configuration)
    )
    try! channel.pipeline.syncOperations.addHandler(manager)
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    var preface = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    preface.writeBytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
    _ = try? channel.writeInbound(preface)
    var read = 0
    var written = Written()
    written.take(channel)
    while !input.isEmpty, channel.isActive {
      let piece = input.piece(most: 200)
      read += piece.count
      _ = try? channel.writeInbound(ByteBuffer(bytes: piece))
      if input.choice(8) == 0 { loop.advanceTime(by: .seconds(1)) }
      written.take(channel)
      // Each frame read may be answered (a PING's ACK, a RST_STREAM, WINDOW_UPDATEs): the
      // replies are bounded by what was read, plus the server's own SETTINGS and GOAWAY.
      require(
        written.bytes <= 1024 + 4 * read,
        "the server wrote \(written.bytes) bytes after reading \(read)"
      )
    }
    if written.connectionError {
      loop.run()
      require(!channel.isActive, "the connection stayed open after GOAWAY \(written.frames)")
    }
  }

  /// Ends an embedded channel as a real event loop would: the tasks it scheduled (a close, a
  /// timer) run, so that none is left holding the channel.
  static func finish(_ channel: EmbeddedChannel, _ loop: EmbeddedEventLoop) {
    loop.run()
    _ = try? channel.finish()
    loop.run()
    try? loop.syncShutdownGracefully()
  }

  /// What the server has written: its frames' types and whether one was a connection error.
  struct Written {
    var bytes = 0
    var frames: [UInt8] = []
    var connectionError = false
    private var pending = ByteBuffer()

    mutating func take(_ channel: EmbeddedChannel) {
      while let part = try? channel.readOutbound(as: IOData.self) {
        if case .byteBuffer(var buffer) = part { self.add(&buffer) }
      }
      while var part = try? channel.readOutbound(as: ByteBuffer.self) { self.add(&part) }
    }

    private mutating func add(_ buffer: inout ByteBuffer) {
      self.bytes += buffer.readableBytes
      self.pending.writeBuffer(&buffer)
      while self.pending.readableBytes >= 9 {
        let start = self.pending.readerIndex
        let length = Int(self.pending.getInteger(at: start, as: UInt32.self)! >> 8)
        guard self.pending.readableBytes >= 9 + length else { break }
        let type = self.pending.getInteger(at: start + 3, as: UInt8.self)!
        self.frames.append(type)
        if type == 0x7, length >= 8, self.pending.getInteger(at: start + 13, as: UInt32.self)! != 0
        {
          self.connectionError = true
        }
        self.pending.moveReaderIndex(forwardBy: 9 + length)
      }
    }
  }

  /// A header block from the input (fields split at 0x00, name from value at 0x01), checked
  /// by `RequestHeaderCheck` and by swift-nio-http2's own validation, which it replaces: the
  /// verdicts must agree, as a request's first block and as trailers.
  static func requestHead(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let trailers = input.choice(2) == 1
    var block: [(String, String)] = []
    while !input.isEmpty, block.count < 16 {
      let raw = input.field(until: 0)
      let split = raw.firstIndex(of: 1) ?? raw.endIndex
      let name = String(decoding: raw[..<split], as: UTF8.self)
      let value = String(decoding: raw[min(split + 1, raw.endIndex)...], as: UTF8.self)
      block.append((name, value))
    }
    let ours = RequestHeaderCheck.isWellFormed(HPACKHeaders(block), trailers ? .trailers : .request)
    // A name that is not a lower-case token (RFC 9113 § 8.2.1, RFC 9110 § 5.6.2), after a
    // pseudo-header's colon, is refused. Here the check is stricter than its oracle, which took
    // a trailers block of two empty names (corpus/request-head/crash-e29b3ead…), `:mEthod` as a
    // request's method (crash-1560f0ae…), and trailers named "%" and "\u{05}" (crash-362cb20f…).
    if !block.allSatisfy({ Self.isLowerCaseToken($0.0) }) {
      return require(!ours, "a block with a name that is not a lower-case token passed: \(block)")
    }
    guard let oracle = HeaderOracle.accepts(block, trailers: trailers) else { return }
    require(
      ours == oracle,
      "\(trailers ? "trailers" : "request") \(block): swift-nio-http2 \(oracle ? "takes" : "refuses") it"
    )
  }

  /// Whether `name` is a token of lower-case `tchar`s (RFC 9110 § 5.6.2), after one leading
  /// colon for a pseudo-header.
  static func isLowerCaseToken(_ name: String) -> Bool {
    let bytes = name.utf8.first == UInt8(ascii: ":") ? name.utf8.dropFirst() : name.utf8[...]
    return !bytes.isEmpty
      && bytes.allSatisfy { byte in
        (UInt8(ascii: "a") ... UInt8(ascii: "z")).contains(byte)
          || (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(byte)
          || "!#$%&'*+-.^_`|~".utf8.contains(byte)
      }
  }

  /// A gRPC request's messages, their bytes from the input cut into DATA frames, through
  /// `GRPCStreamCodec` with a small size limit and an encoding the input picks. What must hold:
  /// no message passed on is over the limit, before or after inflating; without an encoding the
  /// messages are exactly the length-prefixed ones of the bytes sent, until the first refused;
  /// a refusal is `RESOURCE_EXHAUSTED` or `INTERNAL`.
  static func grpcMessages(_ bytes: UnsafeBufferPointer<UInt8>) {
    let limit = 1024
    var input = FuzzInput(bytes)
    let encoding = ["", "gzip", "deflate"][input.choice(3)]
    let frameSize = 1 + input.choice(64)
    let body = Array(input.rest())
    let loop = EmbeddedEventLoop()
    let codec = GRPCStreamCodec(
      maxPayloadSize: limit,
      descriptorsByPath: [:],
      descriptor: loop.makePromise(of: MethodDescriptor.self)
    )
    let channel = EmbeddedChannel(handler: codec, loop: loop)
    defer { Self.finish(channel, loop) }
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    var headers: HPACKHeaders = [
      ":method": "POST", ":scheme": "http", ":path": "/roster.v1.Directory/UpsertEmployees",
      "content-type": "application/grpc", "te": "trailers",
    ]
    if !encoding.isEmpty { headers.add(name: "grpc-encoding", value: encoding) }
    _ = try? channel.writeInbound(HTTP2Frame.FramePayload.headers(.init(headers: headers)))
    var start = 0
    while start < body.count || start == 0 {
      let end = min(start + frameSize, body.count)
      let frame = HTTP2Frame.FramePayload.data(
        .init(
          data: .byteBuffer(ByteBuffer(bytes: body[start ..< end])),
          endStream: end == body.count
        )
      )
      _ = try? channel.writeInbound(frame)
      start = end
      if end == body.count { break }
    }
    var messages: [[UInt8]] = []
    while let part = try? channel.readInbound(as: RPCRequestPart<BufferBytes>.self) {
      if case .message(let bytes) = part { messages.append(Array(buffer: bytes.buffer)) }
    }
    var status: String?
    while let payload = try? channel.readOutbound(as: HTTP2Frame.FramePayload.self) {
      if case .headers(let headers) = payload, let code = headers.headers.first(name: "grpc-status")
      {
        status = code
      }
    }
    for message in messages {
      require(message.count <= limit, "a message of \(message.count) bytes passed the limit")
    }
    if let status {
      require(status == "8" || status == "13", "refused with status \(status)")
    }
    guard encoding.isEmpty else { return }
    // The length-prefixed messages of the body, read the simple way, up to the first that
    // cannot be passed on.
    var expected: [[UInt8]] = []
    var at = 0
    while body.count - at >= 5 {
      let length = body[at + 1 ..< at + 5].reduce(0) { $0 << 8 | Int($1) }
      guard body[at] == 0, length <= limit, body.count - at - 5 >= length else { break }
      expected.append(Array(body[at + 5 ..< at + 5 + length]))
      at += 5 + length
    }
    require(messages == expected, "messages \(messages.count) read, \(expected.count) sent")
  }
}
