import Foundation
import NIOCore
import NIOHTTP2
import NIOPosix
import RosterLocks
import RosterProto
import SwiftProtobuf
import TestSupport
import Testing

/// Connection management on Roster's transport: the age and idle limits, ping policing, and
/// GOAWAY on shutdown.
@Suite("Roster's HTTP/2 transport, connections", .timeLimit(.minutes(10)), .serialized)
struct RosterTransportConnectionTests {
  static func serve(_ extra: [String]) async throws -> (RosterProcess, String) {
    let directory = try makeTemporaryDirectory()
    let server = try await RosterProcess.serve(
      arguments: [
        "--db", directory + "/connections.sqlite", "--seed-employees", "10", "--no-seed-pictures",
        "--seed-sales-per-employee", "0", "--no-log-requests",
      ] + extra
    )
    return (server, directory)
  }

  @Test("a connection older than --max-age-s is sent GOAWAY (NO_ERROR), then closed")
  func maxAge() async throws {
    let (server, directory) = try await Self.serve(["--max-age-s", "1"])
    defer {
      _ = server.terminate()
      try? FileManager.default.removeItem(atPath: directory)
    }
    let connection = try await RawHTTP2Connection.open(port: server.port)
    #expect(try await connection.firstGoAway(within: .seconds(30)) == .noError)
    #expect(
      try await connection.closed(within: .seconds(30)),
      "closed after GOAWAY with no calls open"
    )
  }

  @Test("a connection with no calls for --max-idle-s is sent GOAWAY (NO_ERROR), then closed")
  func maxIdle() async throws {
    let (server, directory) = try await Self.serve(["--max-idle-s", "1"])
    defer {
      _ = server.terminate()
      try? FileManager.default.removeItem(atPath: directory)
    }
    let idle = try await RawHTTP2Connection.open(port: server.port)
    #expect(try await idle.firstGoAway(within: .seconds(30)) == .noError)
    #expect(try await idle.closed(within: .seconds(30)))
  }

  @Test("a client that pings too often without calls is told ENHANCE_YOUR_CALM")
  func pingFlood() async throws {
    let (server, directory) = try await Self.serve([])
    defer {
      _ = server.terminate()
      try? FileManager.default.removeItem(atPath: directory)
    }
    let connection = try await RawHTTP2Connection.open(port: server.port)
    for index in 0 ..< 5 { connection.ping(UInt64(index)) }
    #expect(try await connection.firstGoAway(within: .seconds(30)) == .enhanceYourCalm)
    #expect(try await connection.closed(within: .seconds(30)))
  }

  @Test("a server pings a quiet connection every --keepalive-s, and closes it when no ack comes")
  func keepalive() async throws {
    let (server, directory) = try await Self.serve([
      "--keepalive-s", "1", "--keepalive-timeout-s", "1",
    ])
    defer {
      _ = server.terminate()
      try? FileManager.default.removeItem(atPath: directory)
    }
    let answering = try await RawHTTP2Connection.open(port: server.port)
    #expect(try await answering.pings(atLeast: 2, within: .seconds(30)), "acked pings keep coming")
    #expect(!answering.isClosed)
    let silent = try await SilentHTTP2Client.open(port: server.port)
    #expect(
      try await silent.closed(within: .seconds(30)),
      "no ack: the server closes the connection"
    )
  }

  @Test("SIGTERM sends an open connection GOAWAY and closes it, and the server exits 0")
  func shutdown() async throws {
    let (server, directory) = try await Self.serve([])
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let connection = try await RawHTTP2Connection.open(port: server.port)
    #expect(try await connection.ready(within: .seconds(30)))
    let status = try await RosterProcess.offPool { server.terminate() }
    #expect(status == 0)
    #expect(try await connection.firstGoAway(within: .seconds(10)) == .noError)
    #expect(try await connection.closed(within: .seconds(10)))
  }
}

/// A raw HTTP/2 client connection that records what the server sends on the connection itself
/// (GOAWAY, PING) and whether the server closed it.
final class RawHTTP2Connection: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTP2Frame
  typealias OutboundOut = HTTP2Frame

  private let state = Locked<(goAways: [HTTP2ErrorCode], pings: Int, closed: Bool, settings: Bool)>(
    ([], 0, false, false)
  )
  private var channel: (any Channel)?

  static func open(port: Int) async throws -> RawHTTP2Connection {
    let connection = RawHTTP2Connection()
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .client))
          try channel.pipeline.syncOperations.addHandler(connection)
        }
      }
      .connect(host: "127.0.0.1", port: port).get()
    connection.channel = channel
    return connection
  }

  var isClosed: Bool { self.state.withLock { $0.closed } }

  func ping(_ value: UInt64) {
    guard let channel = self.channel else { return }
    let frame = HTTP2Frame(
      streamID: .rootStream,
      payload: .ping(HTTP2PingData(withInteger: value), ack: false)
    )
    channel.writeAndFlush(frame, promise: nil)
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    let frame = self.unwrapInboundIn(data)
    switch frame.payload {
    case .goAway(_, let code, _):
      self.state.withLock { $0.goAways.append(code) }
    case .settings(.settings):
      self.state.withLock { $0.settings = true }
    case .ping(_, let ack) where !ack:
      // NIOHTTP2Handler acks it.
      self.state.withLock { $0.pings += 1 }
    default:
      ()
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.state.withLock { $0.closed = true }
    context.fireChannelInactive()
  }

  func firstGoAway(within limit: Duration) async throws -> HTTP2ErrorCode? {
    try await waitFor(within: limit) { self.state.withLock { $0.goAways.first } }
  }

  func closed(within limit: Duration) async throws -> Bool {
    try await waitFor(within: limit) { self.state.withLock { $0.closed ? true : nil } } ?? false
  }

  /// Whether the server's SETTINGS came: the connection is an HTTP/2 one on both sides.
  func ready(within limit: Duration) async throws -> Bool {
    try await waitFor(within: limit) { self.state.withLock { $0.settings ? true : nil } } ?? false
  }

  func pings(atLeast count: Int, within limit: Duration) async throws -> Bool {
    try await waitFor(within: limit) { self.state.withLock { $0.pings >= count ? true : nil } }
      ?? false
  }
}

/// A client that sends HTTP/2's preface and an empty SETTINGS frame, then nothing: it never
/// acks the server's SETTINGS or pings.
final class SilentHTTP2Client: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = ByteBuffer
  private let closedFlag = Locked(false)

  static func open(port: Int) async throws -> SilentHTTP2Client {
    let client = SilentHTTP2Client()
    _ = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHandler(client)
        }
      }
      .connect(host: "127.0.0.1", port: port).get()
    return client
  }

  func channelActive(context: ChannelHandlerContext) {
    let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
    context.writeAndFlush(NIOAny(ByteBuffer(bytes: preface)), promise: nil)
    context.fireChannelActive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

  func channelInactive(context: ChannelHandlerContext) {
    self.closedFlag.withLock { $0 = true }
    context.fireChannelInactive()
  }

  func closed(within limit: Duration) async throws -> Bool {
    try await waitFor(within: limit) { self.closedFlag.withLock { $0 ? true : nil } } ?? false
  }
}

/// Polls `value` every 20 ms until it gives something or `limit` has passed.
func waitFor<T>(within limit: Duration, _ value: () -> T?) async throws -> T? {
  let deadline = ContinuousClock.now + limit
  while ContinuousClock.now < deadline {
    if let value = value() { return value }
    try await Task.sleep(for: .milliseconds(20))
  }
  return value()
}
