import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import RosterTransport

/// `ConnectionManager` on an `EmbeddedChannel`, its timers driven by the embedded loop's clock:
/// idle and age, GOAWAY and the close after it, keepalive, ping policing, and floods.
@Suite("Connection management", .timeLimit(.minutes(10)))
struct ConnectionManagerTests {
  static let limits = ConnectionManager.Limits(
    maxIdleTime: .seconds(60),
    maxAge: .seconds(600),
    maxGraceTime: .seconds(10),
    keepaliveTime: .seconds(30),
    keepaliveTimeout: .seconds(5),
    allowKeepaliveWithoutCalls: false,
    minPingIntervalWithoutCalls: .minutes(5)
  )

  /// `limits` without keepalive pings in the way (a quiet connection is pinged after 30 s).
  static let withoutKeepalive: ConnectionManager.Limits = {
    var limits = Self.limits
    limits.keepaliveTime = .hours(10)
    return limits
  }()

  /// A connected channel with a manager in it.
  static func channel(_ limits: ConnectionManager.Limits = Self.limits) throws -> EmbeddedChannel {
    let channel = EmbeddedChannel(
      handler: ConnectionManager(limits: limits),
      loop: EmbeddedEventLoop()
    )
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    return channel
  }

  /// The frames the manager wrote, in order.
  static func written(_ channel: EmbeddedChannel) throws -> [HTTP2Frame.FramePayload] {
    var frames: [HTTP2Frame.FramePayload] = []
    while let frame = try channel.readOutbound(as: HTTP2Frame.self) { frames.append(frame.payload) }
    return frames
  }

  static func goAway(_ payload: HTTP2Frame.FramePayload) -> (HTTP2StreamID, HTTP2ErrorCode)? {
    if case .goAway(let last, let code, _) = payload { return (last, code) }
    return nil
  }

  static let request: HPACKHeaders = [
    ":method": "POST", ":scheme": "http", ":path": "/a.B/C", "te": "trailers",
  ]

  static func open(_ stream: HTTP2StreamID, on channel: EmbeddedChannel) throws {
    try channel.writeInbound(
      HTTP2Frame(streamID: stream, payload: .headers(.init(headers: Self.request)))
    )
    channel.pipeline.fireUserInboundEventTriggered(
      NIOHTTP2StreamCreatedEvent(
        streamID: stream,
        localInitialWindowSize: nil,
        remoteInitialWindowSize: nil
      )
    )
  }

  static func close(_ stream: HTTP2StreamID, on channel: EmbeddedChannel) {
    channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: stream, reason: nil))
  }

  @Test("an idle connection gets GOAWAY after max idle, and is closed once it is written")
  func idle() throws {
    let channel = try Self.channel(Self.withoutKeepalive)
    let loop = channel.embeddedEventLoop
    loop.advanceTime(by: .seconds(59))
    #expect(try Self.written(channel).isEmpty)
    #expect(channel.isActive)
    loop.advanceTime(by: .seconds(1))
    let frames = try Self.written(channel)
    #expect(frames.compactMap(Self.goAway).first.map { $0.1 } == .noError, "\(frames)")
    loop.run()
    #expect(!channel.isActive)
  }

  @Test("a stream open keeps an idle timer from closing; its close starts it again")
  func idleWithStreams() throws {
    let channel = try Self.channel(Self.withoutKeepalive)
    let loop = channel.embeddedEventLoop
    try Self.open(HTTP2StreamID(1), on: channel)
    loop.advanceTime(by: .seconds(120))
    #expect(try Self.written(channel).compactMap(Self.goAway).isEmpty)
    Self.close(HTTP2StreamID(1), on: channel)
    loop.advanceTime(by: .seconds(60))
    #expect(try Self.written(channel).compactMap(Self.goAway).count == 1)
  }

  @Test("a call that ends within the idle time counts the idle time from its end")
  func idleFromLastCall() throws {
    let channel = try Self.channel(Self.withoutKeepalive)
    let loop = channel.embeddedEventLoop
    loop.advanceTime(by: .seconds(40))
    try Self.open(HTTP2StreamID(1), on: channel)
    Self.close(HTTP2StreamID(1), on: channel)
    loop.advanceTime(by: .seconds(59))
    #expect(try Self.written(channel).compactMap(Self.goAway).isEmpty)
    loop.advanceTime(by: .seconds(1))
    #expect(try Self.written(channel).compactMap(Self.goAway).count == 1)
    loop.advanceTime(by: .seconds(120))
    #expect(try Self.written(channel).compactMap(Self.goAway).isEmpty, "one GOAWAY only")
  }

  @Test("after GOAWAY, the last stream's trailers are written before the connection closes")
  func trailersBeforeClose() throws {
    let channel = try Self.channel()
    let loop = channel.embeddedEventLoop
    try Self.open(HTTP2StreamID(1), on: channel)
    channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
    let first = try Self.written(channel)
    #expect(
      first.compactMap(Self.goAway).map { $0.0 } == [HTTP2StreamID(1)],
      "GOAWAY names the last stream"
    )
    // The stream writes its trailers, then closes.
    let trailers = HTTP2Frame(
      streamID: 1,
      payload: .headers(.init(headers: ["grpc-status": "0"], endStream: true))
    )
    channel.write(trailers, promise: nil)
    Self.close(HTTP2StreamID(1), on: channel)
    loop.run()
    let after = try Self.written(channel)
    guard case .headers(let written)? = after.first else {
      Issue.record("the trailers were not written first: \(after)")
      return
    }
    #expect(written.headers.first(name: "grpc-status") == "0")
    #expect(
      after.dropFirst().compactMap(Self.goAway).count == 1,
      "a second GOAWAY follows them: \(after)"
    )
    #expect(!channel.isActive)
  }

  @Test("max age sends GOAWAY; a stream still open past the grace time is cut")
  func ageAndGrace() throws {
    let channel = try Self.channel(Self.withoutKeepalive)
    let loop = channel.embeddedEventLoop
    try Self.open(HTTP2StreamID(1), on: channel)
    loop.advanceTime(by: .seconds(600))
    #expect(try Self.written(channel).compactMap(Self.goAway).count == 1)
    #expect(channel.isActive)
    loop.advanceTime(by: .seconds(10))
    #expect(!channel.isActive)
  }

  @Test("a quiet connection is pinged, and closed when no ack comes; an ack keeps it")
  func keepalive() throws {
    let channel = try Self.channel()
    let loop = channel.embeddedEventLoop
    loop.advanceTime(by: .seconds(30))
    let pings = try Self.written(channel).filter {
      if case .ping(let data, ack: false) = $0 { return data == ConnectionManager.keepalivePing }
      return false
    }
    #expect(pings.count == 1)
    try channel.writeInbound(
      HTTP2Frame(streamID: .rootStream, payload: .ping(ConnectionManager.keepalivePing, ack: true))
    )
    loop.advanceTime(by: .seconds(5))
    #expect(channel.isActive, "acked in time")
    // Quiet again: the next ping goes unanswered.
    loop.advanceTime(by: .seconds(60))
    loop.advanceTime(by: .seconds(5))
    #expect(!channel.isActive)
  }

  @Test(
    "a client that pings too often without calls gets GOAWAY ENHANCE_YOUR_CALM after two strikes"
  )
  func pingPolicing() throws {
    let channel = try Self.channel()
    for _ in 0 ..< 3 {
      try channel.writeInbound(
        HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 7), ack: false))
      )
      #expect(channel.isActive)
    }
    try channel.writeInbound(
      HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 7), ack: false))
    )
    let frames = try Self.written(channel)
    #expect(frames.compactMap(Self.goAway).map { $0.1 } == [.enhanceYourCalm], "\(frames)")
    #expect(!channel.isActive)
  }

  @Test("the server's HEADERS and DATA forgive the client's pings so far; other frames do not")
  func pingsForgivenByData() throws {
    let manager = ConnectionManager(limits: Self.limits)
    let channel = EmbeddedChannel(handler: manager, loop: EmbeddedEventLoop())
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    func ping() throws {
      try channel.writeInbound(
        HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 7), ack: false))
      )
    }
    // One ping, then two strikes; as `NIOHTTP2Handler` writes them, a WINDOW_UPDATE forgives
    // nothing, and DATA forgives all.
    for _ in 0 ..< 3 { try ping() }
    manager.wroteFrame(HTTP2Frame(streamID: 1, payload: .windowUpdate(windowSizeIncrement: 9)))
    manager.wroteFrame(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(.init())))))
    for _ in 0 ..< 3 { try ping() }
    #expect(channel.isActive, "forgiven by DATA")
    #expect(try Self.written(channel).compactMap(Self.goAway).isEmpty)
    manager.wroteFrame(HTTP2Frame(streamID: 1, payload: .windowUpdate(windowSizeIncrement: 9)))
    try ping()
    #expect(try Self.written(channel).compactMap(Self.goAway).map { $0.1 } == [.enhanceYourCalm])
    #expect(!channel.isActive)
  }

  @Test("a flood that swift-nio-http2 refuses closes the connection, so nothing more is read")
  func floodsCloseTheConnection() throws {
    for error in [
      NIOHTTP2Errors.excessiveContinuationFrames() as any Error,
      NIOHTTP2Errors.excessiveRSTFrames(),
      NIOHTTP2Errors.excessivelyLargeHeaderBlock(),
    ] {
      let channel = try Self.channel()
      channel.pipeline.fireErrorCaught(error)
      #expect(!channel.isActive, "\(error)")
    }
    // A stream's error leaves the connection alone.
    let channel = try Self.channel()
    channel.pipeline.fireErrorCaught(NIOHTTP2Errors.streamClosed(streamID: 1, errorCode: .cancel))
    #expect(channel.isActive)
    _ = try? channel.finish()
  }

  /// What reaches the handler after the manager: frames' streams, and stream events.
  final class Heard: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    var frames: [HTTP2StreamID] = []
    var created: [HTTP2StreamID] = []
    var closed: [HTTP2StreamID] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
      self.frames.append(self.unwrapInboundIn(data).streamID)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
      if let event = event as? NIOHTTP2StreamCreatedEvent { self.created.append(event.streamID) }
      if let event = event as? StreamClosedEvent { self.closed.append(event.streamID) }
    }
  }

  @Test(
    "a malformed header block resets its stream with PROTOCOL_ERROR, and nothing after hears of it"
  )
  func malformedHeaderBlocks() throws {
    let heard = Heard()
    let channel = EmbeddedChannel(
      handlers: [ConnectionManager(limits: Self.withoutKeepalive), heard],
      loop: EmbeddedEventLoop()
    )
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    // A new stream whose request has an uppercase name: reset; neither its frame nor its
    // creation and end go on.
    var bad = Self.request
    bad.add(name: "X-Upper", value: "1")
    try channel.writeInbound(HTTP2Frame(streamID: 1, payload: .headers(.init(headers: bad))))
    channel.pipeline.fireUserInboundEventTriggered(
      NIOHTTP2StreamCreatedEvent(
        streamID: 1,
        localInitialWindowSize: nil,
        remoteInitialWindowSize: nil
      )
    )
    Self.close(1, on: channel)
    var frames = try Self.written(channel)
    guard case .rstStream(.protocolError) = frames.first, frames.count == 1 else {
      Issue.record("wrote \(frames)")
      return
    }
    #expect(heard.frames.isEmpty && heard.created.isEmpty && heard.closed.isEmpty)
    // A well-formed stream goes on; its trailers with a pseudo-header reset it, and only the
    // trailers stay here.
    try Self.open(3, on: channel)
    try channel.writeInbound(
      HTTP2Frame(streamID: 3, payload: .headers(.init(headers: [":path": "/"], endStream: true)))
    )
    frames = try Self.written(channel)
    guard case .rstStream(.protocolError) = frames.first, frames.count == 1 else {
      Issue.record("wrote \(frames)")
      return
    }
    Self.close(3, on: channel)
    #expect(heard.frames == [3] && heard.created == [3] && heard.closed == [3])
    // Well-formed trailers go on.
    try Self.open(5, on: channel)
    try channel.writeInbound(
      HTTP2Frame(streamID: 5, payload: .headers(.init(headers: ["x-sum": "1"], endStream: true)))
    )
    #expect(try Self.written(channel).isEmpty)
    #expect(heard.frames == [3, 5, 5])
    _ = try? channel.finish()
  }
}
