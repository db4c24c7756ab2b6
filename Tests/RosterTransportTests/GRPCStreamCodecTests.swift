import Foundation
import GRPCCore
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import RosterTransport

/// `GRPCStreamCodec` on an `EmbeddedChannel`: messages gathered across DATA frames, compressed
/// messages inflated within the size limit, and the statuses for messages it cannot read.
@Suite("gRPC stream codec", .timeLimit(.minutes(10)))
struct GRPCStreamCodecTests {
  static let limit = 64 * 1024

  static func channel() throws -> EmbeddedChannel {
    let loop = EmbeddedEventLoop()
    let codec = GRPCStreamCodec(
      maxPayloadSize: Self.limit,
      descriptorsByPath: [:],
      descriptor: loop.makePromise(of: MethodDescriptor.self)
    )
    let channel = EmbeddedChannel(handler: codec, loop: loop)
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    return channel
  }

  static func headers(_ extra: [(String, String)] = []) -> HTTP2Frame.FramePayload {
    var headers: HPACKHeaders = [
      ":method": "POST", ":scheme": "http", ":path": "/roster.v1.Directory/UpsertEmployees",
      "content-type": "application/grpc", "te": "trailers",
    ]
    for (name, value) in extra { headers.add(name: name, value: value) }
    return .headers(.init(headers: headers))
  }

  static func data(_ bytes: [UInt8], end: Bool = false) -> HTTP2Frame.FramePayload {
    .data(.init(data: .byteBuffer(ByteBuffer(bytes: bytes)), endStream: end))
  }

  static func framed(_ message: [UInt8], compressed: Bool = false, length: Int? = nil) -> [UInt8] {
    let length = UInt32(length ?? message.count)
    return [compressed ? 1 : 0] + withUnsafeBytes(of: length.bigEndian, Array.init) + message
  }

  /// The messages the codec passed on.
  static func messages(_ channel: EmbeddedChannel) throws -> [[UInt8]] {
    var messages: [[UInt8]] = []
    while let part = try channel.readInbound(as: RPCRequestPart<BufferBytes>.self) {
      if case .message(let bytes) = part { messages.append(Array(buffer: bytes.buffer)) }
    }
    return messages
  }

  /// The status the codec wrote, from the trailers of its last HEADERS frame.
  static func status(
    _ channel: EmbeddedChannel
  ) throws -> (code: String?, message: String?, headers: HPACKHeaders?) {
    var last: HPACKHeaders?
    while let payload = try channel.readOutbound(as: HTTP2Frame.FramePayload.self) {
      if case .headers(let headers) = payload { last = headers.headers }
    }
    return (last?.first(name: "grpc-status"), last?.first(name: "grpc-message"), last)
  }

  static func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
      "python3", "-c",
      "import gzip,sys; sys.stdout.buffer.write(gzip.compress(sys.stdin.buffer.read()))",
    ]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(Data(bytes))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Array(data)
  }

  @Test("a message split over many DATA frames, and two messages in one, come out whole")
  func reassembly() throws {
    let channel = try Self.channel()
    try channel.writeInbound(Self.headers())
    let message = (0 ..< 40_000).map { UInt8(truncatingIfNeeded: $0) }
    let framed = Self.framed(message)
    // 1-byte, then 16 KB frames: the prefix itself arrives in pieces.
    try channel.writeInbound(Self.data(Array(framed[0 ..< 1])))
    try channel.writeInbound(Self.data(Array(framed[1 ..< 3])))
    var start = 3
    while start < framed.count {
      let end = min(start + 16_384, framed.count)
      try channel.writeInbound(Self.data(Array(framed[start ..< end])))
      start = end
    }
    try channel.writeInbound(Self.data(Self.framed([1, 2, 3]) + Self.framed([4]), end: true))
    #expect(try Self.messages(channel) == [message, [1, 2, 3], [4]])
  }

  @Test("a gzip message is inflated; a response to it is compressed when the client accepts gzip")
  func gzipBothWays() throws {
    let channel = try Self.channel()
    try channel.writeInbound(
      Self.headers([("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")])
    )
    let message = Array("a message that compresses, a message that compresses".utf8)
    try channel.writeInbound(
      Self.data(Self.framed(try Self.gzip(message), compressed: true), end: true)
    )
    #expect(try Self.messages(channel) == [message])
    // The reply: its headers name gzip, and a large message goes out compressed.
    try channel.writeOutbound(RPCResponsePart<BufferBytes>.metadata([:]))
    try channel.writeOutbound(
      RPCResponsePart<BufferBytes>.message(BufferBytes(repeating: 65, count: 4096))
    )
    var frames: [HTTP2Frame.FramePayload] = []
    while let frame = try channel.readOutbound(as: HTTP2Frame.FramePayload.self) {
      frames.append(frame)
    }
    guard case .headers(let headers)? = frames.first, case .data(let data)? = frames.last,
      case .byteBuffer(let bytes) = data.data
    else {
      Issue.record("expected headers then data: \(frames)")
      return
    }
    #expect(headers.headers.first(name: "grpc-encoding") == "gzip")
    #expect(bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) == 1, "marked compressed")
    #expect(
      bytes.readableBytes < 200,
      "4 KB of one letter, compressed: \(bytes.readableBytes) bytes"
    )
  }

  @Test("a message that inflates past the limit is RESOURCE_EXHAUSTED, and nothing is passed on")
  func zipBomb() throws {
    let channel = try Self.channel()
    try channel.writeInbound(Self.headers([("grpc-encoding", "gzip")]))
    let bomb = try Self.gzip([UInt8](repeating: 0, count: Self.limit * 16))
    // The call's error goes to the server too (here, out of the channel's end).
    #expect(throws: RPCError.self) {
      try channel.writeInbound(Self.data(Self.framed(bomb, compressed: true), end: true))
    }
    #expect(try Self.messages(channel).isEmpty)
    let status = try Self.status(channel)
    #expect(status.code == "8", "\(status)")
    #expect(status.message?.contains("inflates past the limit") == true)
  }

  @Test("a prefix over the limit is RESOURCE_EXHAUSTED at once, before the message arrives")
  func overTheLimit() throws {
    let channel = try Self.channel()
    try channel.writeInbound(Self.headers())
    #expect(throws: RPCError.self) {
      try channel.writeInbound(Self.data(Self.framed([1, 2, 3], length: Int(Int32.max))))
    }
    let status = try Self.status(channel)
    #expect(status.code == "8", "\(status)")
    #expect(status.message?.contains("over the limit") == true)
  }

  @Test("a compressed flag without grpc-encoding is INTERNAL, naming it")
  func compressedWithoutEncoding() throws {
    let channel = try Self.channel()
    try channel.writeInbound(Self.headers())
    #expect(throws: RPCError.self) {
      try channel.writeInbound(Self.data(Self.framed([1, 2, 3], compressed: true), end: true))
    }
    #expect(try Self.messages(channel).isEmpty)
    let status = try Self.status(channel)
    #expect(status.code == "13", "\(status)")
    #expect(status.message?.contains("grpc-encoding") == true)
  }

  @Test(
    "an encoding the server lacks is UNIMPLEMENTED, with the ones it has in grpc-accept-encoding"
  )
  func unsupportedEncoding() throws {
    let channel = try Self.channel()
    try channel.writeInbound(Self.headers([("grpc-encoding", "br")]))
    let status = try Self.status(channel)
    #expect(status.code == "12", "\(status)")
    #expect(status.headers?.first(name: "grpc-accept-encoding") == "gzip,deflate,identity")
  }
}
