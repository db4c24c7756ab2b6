import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import PropertyBased
import Testing

@testable import RosterTransport

/// `RequestHeaderCheck` against the library it replaces: swift-nio-http2's own header block
/// validation, on random blocks. Each block goes to a `NIOHTTP2Handler` with its validation on
/// (the oracle), which resets a malformed block's stream, and to `RequestHeaderCheck`; the two
/// verdicts must agree, for request blocks and for trailers. The random blocks are a property
/// check (swift-property-based): a disagreement is reported with its seed, shrunk to the fewest
/// edits of a well-formed block that still disagree.
@Suite("Request header checks against swift-nio-http2", .timeLimit(.minutes(10)))
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

  /// One change to a block: a field dropped, repeated, moved, given another value, or a new
  /// field inserted. Positions are taken modulo the block's length when it is applied.
  enum Edit: CustomStringConvertible {
    case drop(Int)
    case repeatField(Int)
    case swap(Int, Int)
    case revalue(Int, String)
    case insert(Int, String, String)

    var description: String {
      switch self {
      case .drop(let at): "drop \(at)"
      case .repeatField(let at): "repeat \(at)"
      case .swap(let a, let b): "swap \(a) \(b)"
      case .revalue(let at, let value): "revalue \(at) \(value.debugDescription)"
      case .insert(let at, let name, let value):
        "insert \(at) \(name.debugDescription): \(value.debugDescription)"
      }
    }
  }

  /// Edits, each shrinking towards `drop(0)`: a failing block shrinks to the fewest and
  /// simplest changes that still fail.
  static let edit = zip(
    Gen.int(in: 0 ... 4),
    Gen.int(in: 0 ... 7),
    Gen.int(in: 0 ... 7),
    Gen.element(of: Self.names),
    Gen.element(of: Self.values)
  ).map { kind, at, other, name, value -> Edit in
    switch kind {
    case 0: .drop(at)
    case 1: .repeatField(at)
    case 2: .swap(at, other)
    case 3: .revalue(at, value ?? "")
    default: .insert(at, name ?? "", value ?? "")
    }
  }

  /// A gRPC request (or a CONNECT, or as trailers) with up to three edits.
  static let blocks = zip(Gen.int(in: 0 ... 11), Self.edit.array(of: 0 ... 3))

  /// The block for a base and its edits; trailers for one base in three.
  static func block(base: Int, edits: [Edit]) -> (block: [(String, String)], trailers: Bool) {
    var block: [(String, String)] =
      base % 4 == 3
      ? [(":method", "CONNECT"), (":authority", "host:443")]
      : [
        (":method", "POST"), (":scheme", "http"), (":path", "/roster.v1.Directory/GetEmployee"),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
      ]
    for edit in edits {
      switch edit {
      case .drop(let at) where !block.isEmpty: block.remove(at: at % block.count)
      case .repeatField(let at) where !block.isEmpty: block.append(block[at % block.count])
      case .swap(let a, let b) where !block.isEmpty: block.swapAt(a % block.count, b % block.count)
      case .revalue(let at, let value) where !block.isEmpty: block[at % block.count].1 = value
      case .insert(let at, let name, let value):
        block.insert((name, value), at: at % (block.count + 1))
      default: break
      }
    }
    return (block, base % 3 == 2)
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
  func sameVerdicts() async throws {
    var refused = (request: 0, trailers: 0)
    await propertyCheck(count: 1_500, input: Self.blocks) { base, edits in
      // swift-property-based drops what a body throws: record it, or the check would pass.
      do {
        let (block, trailers) = Self.block(base: base, edits: edits)
        guard try !Self.compare(block, trailers: trailers, "edits \(edits), ") else { return }
        if trailers { refused.trailers += 1 } else { refused.request += 1 }
      } catch {
        Issue.record(error)
      }
    }
    // The generator makes both kinds often enough for the comparison to mean something.
    #expect(refused.request > 100 && refused.trailers > 50, "\(refused)")
  }
}
