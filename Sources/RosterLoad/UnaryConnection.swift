internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import NIOPosix
internal import Synchronization

/// A lean gRPC client for unary calls: one HTTP/2 connection whose streams are frames on the
/// connection's own handler, with no channel, task or state machine per call.
///
/// `roster load` sends its unary scenarios this way over plaintext. grpc-swift's client made
/// each call cost about 140 µs of client CPU against h2load's 8 µs, and on a machine the
/// client shares with the server that CPU comes out of the server's share (see
/// `scripts/bench-load-accuracy`). Streaming scenarios and TLS use grpc-swift.
///
/// ```swift
/// let connection = try await UnaryConnection.connect(host: "127.0.0.1", port: 50051, metadata: [], on: loop)
/// let reply = try await connection.call(path: "/roster.v1.Directory/GetEmployee", message: bytes)
/// ```
final class UnaryConnection: Sendable {
  /// One HTTP/2 connection and its handler.
  private struct Link: Sendable {
    let channel: any Channel
    let handler: UnaryCallHandler
  }

  private struct State {
    var link: Link
    /// The connection being opened to replace one the server is closing.
    var replacing: Task<Link, any Error>?
  }

  private let host: String
  private let port: Int
  private let metadata: [(String, String)]
  private let eventLoop: any EventLoop
  private let state: Mutex<State>

  private init(host: String, port: Int, metadata: [(String, String)], eventLoop: any EventLoop, link: Link) {
    self.host = host
    self.port = port
    self.metadata = metadata
    self.eventLoop = eventLoop
    self.state = Mutex(State(link: link))
  }

  /// Connects to `host:port` over plaintext HTTP/2 on `eventLoop`.
  ///
  /// When the server closes the connection (GOAWAY, as servers do after a number of requests
  /// or an age, or when they stop), the next call opens a new one, and calls the server did
  /// not take (streams past the GOAWAY's last stream id) are sent again on it, as HTTP/2
  /// allows: nothing else is retried.
  ///
  /// - Parameter metadata: headers sent with every call, such as the bearer token.
  static func connect(
    host: String,
    port: Int,
    metadata: [(String, String)],
    on eventLoop: any EventLoop
  ) async throws -> UnaryConnection {
    let link = try await Self.open(host: host, port: port, metadata: metadata, on: eventLoop)
    return UnaryConnection(host: host, port: port, metadata: metadata, eventLoop: eventLoop, link: link)
  }

  private static func open(
    host: String,
    port: Int,
    metadata: [(String, String)],
    on eventLoop: any EventLoop
  ) async throws -> Link {
    let handler = UnaryCallHandler(authority: "\(host):\(port)", metadata: metadata)
    let channel = try await ClientBootstrap(group: eventLoop)
      .channelOption(.socketOption(.tcp_nodelay), value: 1)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          let settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 1_000),
            HTTP2Setting(parameter: .initialWindowSize, value: UnaryCallHandler.window),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 16),
          ]
          // The server's headers are checked by what reads them; validating each block again
          // costs CPU that a load generator takes from the server it measures.
          let http2 = NIOHTTP2Handler(
            mode: .client,
            initialSettings: settings,
            headerBlockValidation: .disabled,
            contentLengthValidation: .disabled
          )
          try channel.pipeline.syncOperations.addHandler(http2)
          try channel.pipeline.syncOperations.addHandler(handler)
        }
      }
      .connect(host: host, port: port)
      .get()
    return Link(channel: channel, handler: handler)
  }

  /// Sends one unary call and returns the response message's bytes.
  ///
  /// - Throws: `RPCError` with the server's status, `DEADLINE_EXCEEDED` when `timeout` passes
  ///   first, or `UNAVAILABLE` when the connection fails.
  func call(path: String, message: [UInt8], timeout: Duration? = nil) async throws -> [UInt8] {
    do {
      return try await self.send(path: path, message: message, timeout: timeout, on: try await self.link())
    } catch is UnaryCallHandler.NotTaken {
      // The server never saw it: once more, on the connection that replaces this one.
      do {
        return try await self.send(path: path, message: message, timeout: timeout, on: try await self.link())
      } catch is UnaryCallHandler.NotTaken {
        throw RPCError(code: .unavailable, message: "the server closed two connections before taking the call")
      }
    }
  }

  private func send(path: String, message: [UInt8], timeout: Duration?, on link: Link) async throws -> [UInt8] {
    let loop = link.channel.eventLoop
    let promise = loop.makePromise(of: [UInt8].self)
    let handler = link.handler
    if loop.inEventLoop {
      handler.start(path: path, message: message, timeout: timeout, promise: promise)
    } else {
      loop.execute {
        handler.start(path: path, message: message, timeout: timeout, promise: promise)
      }
    }
    return try await promise.futureResult.get()
  }

  /// The connection to send on: the current one while it takes calls, else its replacement
  /// (one reconnect, however many calls ask at once).
  private func link() async throws -> Link {
    let (link, replacing) = self.state.withLock { state -> (Link?, Task<Link, any Error>?) in
      if state.link.handler.isOpen { return (state.link, nil) }
      if let replacing = state.replacing { return (nil, replacing) }
      let (host, port, metadata, loop) = (self.host, self.port, self.metadata, self.eventLoop)
      let replacing = Task { try await Self.open(host: host, port: port, metadata: metadata, on: loop) }
      state.replacing = replacing
      return (nil, replacing)
    }
    if let link { return link }
    do {
      let new = try await replacing!.value
      // The old connection finishes what the server took; then the server closes it.
      self.state.withLock { state in
        if state.replacing == replacing { (state.link, state.replacing) = (new, nil) }
      }
      return new
    } catch {
      self.state.withLock { state in if state.replacing == replacing { state.replacing = nil } }
      throw RPCError(code: .unavailable, message: "could not reconnect to \(self.host):\(self.port): \(error)")
    }
  }

  /// Closes the connection; calls in flight fail with `UNAVAILABLE`.
  func close() async {
    let (link, replacing) = self.state.withLock { ($0.link, $0.replacing) }
    try? await link.channel.close()
    if let new = try? await replacing?.value { try? await new.channel.close() }
  }
}

/// Turns calls into HEADERS + DATA frames and matches the answers back by stream id.
///
/// `@unchecked Sendable`: every property is touched only on the channel's event loop.
/// `UnaryConnection.call` hops there before calling `start`.
final class UnaryCallHandler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTP2Frame
  typealias OutboundOut = HTTP2Frame

  /// A call the server did not take: sent past the last stream id of its GOAWAY, or started
  /// after it. Safe to send again on another connection.
  struct NotTaken: Error {}

  /// Whether new calls may start here: false once the server sent GOAWAY or the connection
  /// closed. Read from any thread.
  var isOpen: Bool { self.open.load(ordering: .relaxed) }
  private let open = Atomic(true)

  /// The flow-control window this client grants, per stream and for the connection.
  static let window = 16 << 20

  private struct Call {
    var promise: EventLoopPromise<[UInt8]>
    var body: ByteBuffer?
    var timer: Scheduled<Void>?
  }

  private let authority: String
  private let metadata: [(String, String)]
  private var context: ChannelHandlerContext?
  private var nextStreamID = 1
  private var calls: [HTTP2StreamID: Call] = [:]
  private var unacknowledgedBytes = 0
  private var flushPending = false
  private var failure: RPCError?
  private var goingAway = false
  /// The last stream id of the server's latest GOAWAY: streams past it were ignored, even
  /// those sent before that GOAWAY arrived.
  private var lastTakenStreamID = HTTP2StreamID.maxID
  private var headersByPath: [String: HPACKHeaders] = [:]

  init(authority: String, metadata: [(String, String)]) {
    self.authority = authority
    self.metadata = metadata
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
  }

  func channelActive(context: ChannelHandlerContext) {
    // Grant the connection the same window as each stream (the default is 64 KiB).
    let increment = Self.window - 65_535
    context.writeAndFlush(
      self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
      promise: nil
    )
    context.fireChannelActive()
  }

  func start(
    path: String,
    message: [UInt8],
    timeout: Duration?,
    promise: EventLoopPromise<[UInt8]>
  ) {
    guard let context = self.context, self.failure == nil else {
      promise.fail(self.goingAway ? NotTaken() : self.failure ?? RPCError(code: .unavailable, message: "the connection is not open"))
      return
    }
    let streamID = HTTP2StreamID(self.nextStreamID)
    self.nextStreamID += 2
    var headers = self.headers(for: path)
    if let timeout {
      headers.add(name: "grpc-timeout", value: "\(max(1, timeout.milliseconds))m")
    }
    var body = context.channel.allocator.buffer(capacity: 5 + message.count)
    body.writeInteger(UInt8(0))
    body.writeInteger(UInt32(message.count))
    body.writeBytes(message)

    var call = Call(promise: promise)
    if let timeout {
      call.timer = context.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout.milliseconds) * 1_000_000)) {
        self.expire(streamID)
      }
    }
    self.calls[streamID] = call
    context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
    context.write(
      self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
      promise: nil
    )
    self.flushSoon(context)
  }

  /// Flushes once the loop has run what is queued: calls started in the same tick share one
  /// `writev`, as h2load's do. Flushing every call cost a system call per request.
  private func flushSoon(_ context: ChannelHandlerContext) {
    guard !self.flushPending else { return }
    self.flushPending = true
    context.eventLoop.execute {
      self.flushPending = false
      self.context?.flush()
    }
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    let frame = self.unwrapInboundIn(data)
    switch frame.payload {
    case .headers(let headers):
      if let status = headers.headers.first(name: "grpc-status") {
        let message = headers.headers.first(name: "grpc-message").map(Self.percentDecoded) ?? ""
        self.finish(frame.streamID, status: Int(status) ?? 2, message: message)
      } else if let status = headers.headers.first(name: ":status"), status != "200" {
        self.finish(frame.streamID, status: Self.grpcStatus(httpStatus: status), message: "HTTP status \(status)")
      } else if headers.endStream {
        self.finish(frame.streamID, status: 13, message: "the response ended without a grpc-status")
      }

    case .data(let payload):
      guard case .byteBuffer(var bytes) = payload.data else { return }
      self.acknowledge(bytes.readableBytes + (payload.paddingBytes ?? 0), context: context)
      if self.calls[frame.streamID] != nil {
        if self.calls[frame.streamID]!.body == nil {
          self.calls[frame.streamID]!.body = bytes
        } else {
          self.calls[frame.streamID]!.body!.writeBuffer(&bytes)
        }
      }
      if payload.endStream {
        self.finish(frame.streamID, status: 13, message: "the response ended without a grpc-status")
      }

    case .rstStream(let code) where code == .refusedStream:
      // HTTP/2: a refused stream was not processed; it may be sent again elsewhere.
      guard let call = self.calls.removeValue(forKey: frame.streamID) else { return }
      call.timer?.cancel()
      call.promise.fail(NotTaken())

    case .rstStream(let code):
      self.finish(frame.streamID, status: code == .cancel ? 1 : 14, message: "the server reset the stream (\(code))")

    case .goAway(let lastStreamID, _, _):
      // Calls the server has taken still finish; later ones go to another connection.
      self.failure = RPCError(code: .unavailable, message: "the server is closing the connection (GOAWAY)")
      self.goingAway = true
      self.lastTakenStreamID = min(self.lastTakenStreamID, lastStreamID)
      self.open.store(false, ordering: .relaxed)
      for streamID in self.calls.keys where streamID > lastStreamID {
        guard let call = self.calls.removeValue(forKey: streamID) else { continue }
        call.timer?.cancel()
        call.promise.fail(NotTaken())
      }

    default:
      break
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.open.store(false, ordering: .relaxed)
    for streamID in self.calls.keys where streamID > self.lastTakenStreamID {
      guard let call = self.calls.removeValue(forKey: streamID) else { continue }
      call.timer?.cancel()
      call.promise.fail(NotTaken())
    }
    self.failAll(RPCError(code: .unavailable, message: "the connection closed"))
    self.context = nil
    context.fireChannelInactive()
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    self.open.store(false, ordering: .relaxed)
    self.failAll(RPCError(code: .unavailable, message: "connection error: \(error)"))
    context.close(promise: nil)
  }

  // MARK: - Private

  private func headers(for path: String) -> HPACKHeaders {
    if let headers = self.headersByPath[path] { return headers }
    var headers = HPACKHeaders([
      (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", self.authority),
      ("content-type", "application/grpc"), ("te", "trailers"), ("user-agent", "roster-load"),
    ])
    for (name, value) in self.metadata { headers.add(name: name, value: value) }
    self.headersByPath[path] = headers
    return headers
  }

  /// Hands received bytes back to the server's connection window once enough have arrived.
  private func acknowledge(_ count: Int, context: ChannelHandlerContext) {
    self.unacknowledgedBytes += count
    guard self.unacknowledgedBytes >= Self.window / 4 else { return }
    let increment = self.unacknowledgedBytes
    self.unacknowledgedBytes = 0
    context.writeAndFlush(
      self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
      promise: nil
    )
  }

  private func finish(_ streamID: HTTP2StreamID, status: Int, message: String) {
    guard let call = self.calls.removeValue(forKey: streamID) else { return }
    call.timer?.cancel()
    guard status == 0 else {
      let code = RPCError.Code(Status.Code(rawValue: status) ?? .unknown) ?? .unknown
      call.promise.fail(RPCError(code: code, message: message))
      return
    }
    guard var body = call.body,
      let compressed = body.readInteger(as: UInt8.self), compressed == 0,
      let length = body.readInteger(as: UInt32.self),
      let bytes = body.readBytes(length: Int(length))
    else {
      call.promise.fail(RPCError(code: .internalError, message: "the response is not one uncompressed gRPC message"))
      return
    }
    call.promise.succeed(bytes)
  }

  private func expire(_ streamID: HTTP2StreamID) {
    guard self.calls[streamID] != nil, let context = self.context else { return }
    context.writeAndFlush(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
    self.finish(streamID, status: 4, message: "the deadline passed")
  }

  private func failAll(_ error: RPCError) {
    self.failure = self.failure ?? error
    let calls = self.calls
    self.calls = [:]
    for call in calls.values {
      call.timer?.cancel()
      call.promise.fail(error)
    }
  }

  /// gRPC's mapping of HTTP statuses, for answers that are not gRPC at all.
  private static func grpcStatus(httpStatus: String) -> Int {
    switch httpStatus {
    case "400": return 13
    case "401": return 16
    case "403": return 7
    case "404": return 12
    case "429", "502", "503", "504": return 14
    default: return 2
    }
  }

  private static func percentDecoded(_ text: String) -> String {
    text.removingPercentEncoding ?? text
  }
}
