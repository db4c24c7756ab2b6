import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import RosterTransport

/// `RequestHeaderCheck` against the library it replaces: swift-nio-http2's own header block
/// validation, on random blocks. Each block goes to a `NIOHTTP2Handler` with its validation on
/// (the oracle), which resets a malformed block's stream, and to `RequestHeaderCheck`; the two
/// verdicts must agree, for request blocks and for trailers.
@Suite("Request header checks against swift-nio-http2", .timeLimit(.minutes(2)))
struct RequestHeaderCheckOracleTests {
  /// Names a client might send, well-formed or not, pseudo-headers among them.
  static let names = [
    ":method", ":scheme", ":path", ":authority", ":status", ":protocol", ":other", "content-type",
    "te", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
    "x-note", "grpc-timeout", "user-agent", "X-Upper", "x note", "x-é", "", "x\u{7f}", "x:y",
    "accept-encoding", "host", "x_underscore", "x~tilde",
  ]
  /// Values, for the same.
  static let values = [
    "POST", "GET", "CONNECT", "http", "https", "/", "/a", "", "trailers", "gzip", "/a b",
    "a\nb", "a\rb", "a\u{0}b", " lead", "trail ", "\t", "café", "/\u{7f}", "a\u{1}b", "x, y",
    "application/grpc", "host:443", "5S",
  ]

  /// A small deterministic generator (splitmix64), so a failing block can be found again.
  struct Random {
    var state: UInt64
    mutating func next() -> UInt64 {
      self.state &+= 0x9E37_79B9_7F4A_7C15
      var z = self.state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    mutating func pick<T>(_ items: [T]) -> T { items[Int(self.next() % UInt64(items.count))] }
    mutating func chance(_ inEvery: UInt64) -> Bool { self.next() % inEvery == 0 }
  }

  /// A block that is mostly a gRPC request, with a few random changes: fields dropped,
  /// repeated, moved or replaced by random ones.
  static func block(_ random: inout Random) -> [(String, String)] {
    var block: [(String, String)] = [
      (":method", "POST"), (":scheme", "http"), (":path", "/roster.v1.Directory/GetEmployee"),
      (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
    ]
    if random.chance(4) { block = [(":method", "CONNECT"), (":authority", "host:443")] }
    for _ in 0 ..< Int(random.next() % 4) {
      switch random.next() % 5 {
      case 0 where !block.isEmpty:
        block.remove(at: Int(random.next() % UInt64(block.count)))
      case 1 where !block.isEmpty:
        block.append(block[Int(random.next() % UInt64(block.count))])
      case 2 where block.count > 1:
        block.swapAt(
          Int(random.next() % UInt64(block.count)),
          Int(random.next() % UInt64(block.count))
        )
      case 3 where !block.isEmpty:
        let index = Int(random.next() % UInt64(block.count))
        block[index].1 = random.pick(Self.values)
      default:
        block.insert(
          (random.pick(Self.names), random.pick(Self.values)),
          at: Int(random.next() % UInt64(block.count + 1))
        )
      }
    }
    return block
  }

  /// Whether swift-nio-http2, its validation on, takes `block` as the stream's request
  /// headers (or, with `trailers`, as its trailers after a well-formed request): false when it
  /// resets the stream or ends the connection.
  static func nioAccepts(_ block: [(String, String)], trailers: Bool) throws -> Bool {
    var configuration = NIOHTTP2Handler.ConnectionConfiguration()
    configuration.headerBlockValidation = .enabled
    configuration.contentLengthValidation = .disabled
    let channel = EmbeddedChannel(
      handler: NIOHTTP2Handler(mode: .server, connectionConfiguration: configuration),
      loop: EmbeddedEventLoop()
    )
    defer { _ = try? channel.finish() }
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    var bytes = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    bytes.writeImmutableBuffer(ConnectionErrorTests.frame(type: 0x4, flags: 0, stream: 0))
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    if trailers {
      bytes.writeImmutableBuffer(
        try Self.headersFrame(Self.request, ends: false, encoder: &encoder)
      )
    }
    bytes.writeImmutableBuffer(try Self.headersFrame(block, ends: true, encoder: &encoder))
    _ = try? channel.writeInbound(bytes)
    let frames = ConnectionErrorTests.written(channel)
    // An empty name never reaches the check: swift-nio-http2's HPACK decoder refuses it, for
    // the whole connection (COMPRESSION_ERROR).
    return !frames.contains { $0.type == 0x7 || ($0.type == 0x3 && $0.stream == 1) }
  }

  static let request: [(String, String)] = [
    (":method", "POST"), (":scheme", "http"), (":path", "/a.B/C"), ("te", "trailers"),
  ]

  static func headersFrame(
    _ block: [(String, String)],
    ends: Bool,
    encoder: inout HPACKEncoder
  ) throws -> ByteBuffer {
    var encoded = ByteBuffer()
    try encoder.encode(headers: HPACKHeaders(block), to: &encoded)
    return ConnectionErrorTests.frame(
      type: 0x1,
      flags: ends ? 0x5 : 0x4,
      stream: 1,
      payload: Array(encoded.readableBytesView)
    )
  }

  /// Every name with every value, as one field added to a well-formed request and as the
  /// whole of a trailers block; every field of a well-formed request with every value.
  static var probes: [(block: [(String, String)], trailers: Bool)] {
    let base: [(String, String)] = [
      (":method", "POST"), (":scheme", "http"), (":path", "/a.B/C"), (":authority", "localhost"),
      ("content-type", "application/grpc"), ("te", "trailers"),
    ]
    var probes: [([(String, String)], Bool)] = []
    for name in Self.names {
      for value in Self.values {
        probes.append((base + [(name, value)], false))
        probes.append(([(name, value)], true))
      }
    }
    for index in base.indices {
      for value in Self.values {
        var block = base
        block[index].1 = value
        probes.append((block, false))
      }
    }
    return probes
  }

  /// Checks `block` with both, expecting the same verdict; returns swift-nio-http2's.
  static func compare(_ block: [(String, String)], trailers: Bool, _ label: String) throws -> Bool {
    let oracle = try Self.nioAccepts(block, trailers: trailers)
    let ours = RequestHeaderCheck.isWellFormed(HPACKHeaders(block), trailers ? .trailers : .request)
    let kind = trailers ? "trailers" : "request"
    #expect(
      ours == oracle,
      "\(label)\(kind) \(block): swift-nio-http2 \(oracle ? "takes" : "refuses") it"
    )
    return oracle
  }

  @Test("the same verdict as swift-nio-http2's validation on every single-field probe")
  func sameVerdictsOnProbes() throws {
    var refused = 0
    for (block, trailers) in Self.probes where try !Self.compare(block, trailers: trailers, "") {
      refused += 1
    }
    #expect(
      refused > 100 && refused < Self.probes.count - 100,
      "\(refused) of \(Self.probes.count) refused"
    )
  }

  @Test("the same verdict as swift-nio-http2's validation on random request blocks and trailers")
  func sameVerdicts() throws {
    var random = Random(state: 9_113)
    var refused = (request: 0, trailers: 0)
    for round in 0 ..< 1_500 {
      let trailers = round % 3 == 2
      guard try !Self.compare(Self.block(&random), trailers: trailers, "round \(round), ") else {
        continue
      }
      if trailers { refused.trailers += 1 } else { refused.request += 1 }
    }
    // The generator makes both kinds often enough for the comparison to mean something.
    #expect(refused.request > 100 && refused.trailers > 50, "\(refused)")
  }
}
