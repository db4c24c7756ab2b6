import Foundation
import GRPCCore
import NIOCore
import NIOEmbedded
import NIOHTTP1
import RosterProto
import RosterServices
import Testing

@testable import RosterProtocols

/// `ConnectHTTP1Handler` on a testing channel: the Connect protocol over HTTP/1.1 as a
/// connection sees it, request parts in and response parts out, with no socket and no server.
@Suite("Connect over HTTP/1.1, on a testing channel")
struct ConnectHTTP1HandlerTests {
  /// A channel with the handler, serving one method (`Health.Check`, always `SERVING`) and
  /// taking requests of at most `limit` bytes.
  static func channel(limit: Int = 1024) async throws -> NIOAsyncTestingChannel {
    let check = UnaryFastPath.Method.protobufNow(Grpc_Health_V1_Health.Method.Check.descriptor) {
      (_: Grpc_Health_V1_HealthCheckRequest, _) in
      Grpc_Health_V1_HealthCheckResponse.with { $0.status = .serving }
    }
    let fastPath = UnaryFastPath(methods: [check], chain: CallChain([]), maxRequestBytes: limit)
    let connect = ConnectUnary(fastPath: fastPath)
    let streams = ConnectStreams(
      methods: [],
      bridge: CallBridge(),
      maxRequestBytes: limit,
      cors: nil,
      unaryPaths: Set(fastPath.methods.keys)
    )
    let channel = NIOAsyncTestingChannel()
    let executor = EventLoopGroupExecutor(group: channel.testingEventLoop)
    try await channel.pipeline.addHandler(
      ConnectHTTP1Handler(connect: connect, streams: streams, executor: executor)
    )
    try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
    return channel
  }

  /// Sends one request: its head (with `headers`), its body in one part, its end.
  static func send(
    _ channel: NIOAsyncTestingChannel,
    path: String,
    body: String,
    headers: [(String, String)] = [("content-type", "application/json")]
  ) async throws {
    var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
    head.headers.add(contentsOf: headers)
    try await channel.writeInbound(HTTPServerRequestPart.head(head))
    try await channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: body)))
    try await channel.writeInbound(HTTPServerRequestPart.end(nil))
  }

  /// The reply the handler writes: its head, and its body as text, up to its end.
  static func reply(
    _ channel: NIOAsyncTestingChannel
  ) async throws -> (head: HTTPResponseHead, body: String) {
    guard
      case .head(let head) = try await channel.waitForOutboundWrite(as: HTTPServerResponsePart.self)
    else {
      throw RPCError(code: .internalError, message: "the reply did not start with its head")
    }
    var body = ByteBuffer()
    while true {
      switch try await channel.waitForOutboundWrite(as: HTTPServerResponsePart.self) {
      case .body(.byteBuffer(var part)): body.writeBuffer(&part)
      case .body: throw RPCError(code: .internalError, message: "a file region in a reply")
      case .head: throw RPCError(code: .internalError, message: "a second head")
      case .end: return (head, String(buffer: body))
      }
    }
  }

  @Test("a Connect JSON call is answered with the method's reply, and the connection stays open")
  func answersACall() async throws {
    let channel = try await Self.channel()
    try await Self.send(channel, path: "/grpc.health.v1.Health/Check", body: "{}")
    let (head, body) = try await Self.reply(channel)
    #expect(head.status == .ok)
    #expect(head.headers.first(name: "content-type") == "application/json")
    #expect(head.headers.first(name: "content-length") == String(body.utf8.count))
    #expect(body == #"{"status":"SERVING"}"#)
    #expect(channel.isActive)
    _ = try? await channel.finish()
  }

  @Test("an unknown method is answered 404 with Connect's unimplemented, naming the path")
  func unknownMethod() async throws {
    let channel = try await Self.channel()
    try await Self.send(channel, path: "/roster.v1.Directory/NoSuchMethod", body: "{}")
    let (head, body) = try await Self.reply(channel)
    #expect(head.status == .notFound)
    #expect(body.contains(#""code":"unimplemented""#))
    #expect(body.contains("/roster.v1.Directory/NoSuchMethod"))
    _ = try? await channel.finish()
  }

  @Test("a request that does not decode is refused with invalid_argument; the next one is served")
  func badJSONThenAGoodCall() async throws {
    let channel = try await Self.channel()
    try await Self.send(channel, path: "/grpc.health.v1.Health/Check", body: "{not json")
    let (refused, refusal) = try await Self.reply(channel)
    #expect(refused.status == .badRequest)
    #expect(refusal.contains(#""code":"invalid_argument""#))
    try await Self.send(channel, path: "/grpc.health.v1.Health/Check", body: "{}")
    let (head, body) = try await Self.reply(channel)
    #expect(head.status == .ok)
    #expect(body == #"{"status":"SERVING"}"#)
    _ = try? await channel.finish()
  }

  @Test("a body over the limit is refused at once with resource_exhausted, and the rest dropped")
  func oversizedBody() async throws {
    let channel = try await Self.channel(limit: 16)
    var head = HTTPRequestHead(
      version: .http1_1,
      method: .POST,
      uri: "/grpc.health.v1.Health/Check"
    )
    head.headers.add(name: "content-type", value: "application/json")
    try await channel.writeInbound(HTTPServerRequestPart.head(head))
    try await channel.writeInbound(
      HTTPServerRequestPart.body(ByteBuffer(string: String(repeating: " ", count: 32)))
    )
    let (reply, body) = try await Self.reply(channel)
    #expect(reply.status == .tooManyRequests)
    #expect(reply.headers.first(name: "connection") == "close")
    #expect(body.contains(#""code":"resource_exhausted""#))
    // The rest of the body is dropped: nothing more is answered. (The testing channel has no
    // half-closed state, so the output's close and the drain before the full close are
    // checked on a socket, by the abuse interop tests.)
    try await channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "more")))
    try await channel.writeInbound(HTTPServerRequestPart.end(nil))
    await channel.testingEventLoop.advanceTime(by: ConnectHTTP1Handler.drainTime)
    #expect(try await channel.readOutbound(as: HTTPServerResponsePart.self) == nil)
  }

  @Test("a request with Connection: close is answered, then the connection closes")
  func connectionClose() async throws {
    let channel = try await Self.channel()
    try await Self.send(
      channel,
      path: "/grpc.health.v1.Health/Check",
      body: "{}",
      headers: [("content-type", "application/json"), ("connection", "close")]
    )
    let (head, body) = try await Self.reply(channel)
    #expect(head.status == .ok)
    #expect(head.headers.first(name: "connection") == "close")
    #expect(body == #"{"status":"SERVING"}"#)
    await channel.testingEventLoop.run()
    #expect(!channel.isActive)
  }
}
