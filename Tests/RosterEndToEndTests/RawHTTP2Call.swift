import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix

/// What a server sent back on one HTTP/2 stream: the response headers (nil for a
/// trailers-only reply), the body's bytes, and the trailers (or the only headers).
struct RawHTTP2Reply: Equatable, CustomStringConvertible {
  var headers: [String]?
  var body: [UInt8]
  var trailers: [String]
  /// Whether the server reset the stream instead of ending it.
  var reset: Bool = false

  var description: String {
    "headers \(self.headers.map { "\($0)" } ?? "none"), \(self.body.count) body bytes, trailers \(self.trailers)\(self.reset ? ", reset" : "")"
  }

  /// The value of trailer `name`.
  func trailer(_ name: String) -> String? {
    self.trailers.first { $0.hasPrefix(name + ": ") }.map { String($0.dropFirst(name.count + 2)) }
  }
}

/// Sends one request made of exactly the frames given (so tests can send what gRPC clients
/// never would) over a new HTTP/2 connection, and collects the reply.
///
/// `headers` are sent as given (pseudo-headers first); `body` follows as one DATA frame with
/// END_STREAM, or END_STREAM goes on the headers when `body` is nil.
func rawHTTP2Call(
  port: Int,
  headers: [(String, String)],
  body: [UInt8]?
) async throws -> RawHTTP2Reply {
  let group = MultiThreadedEventLoopGroup.singleton
  let channel = try await ClientBootstrap(group: group)
    .connect(host: "127.0.0.1", port: port) { channel in
      channel.eventLoop.makeCompletedFuture {
        try channel.pipeline.syncOperations.configureHTTP2Pipeline(
          mode: .client,
          connectionConfiguration: .init(),
          streamConfiguration: .init()
        ) { pushed in pushed.close() }
      }.map { (channel, $0) }
    }
  let (connection, multiplexer) = channel
  defer { connection.close(promise: nil) }
  let reply = connection.eventLoop.makePromise(of: RawHTTP2Reply.self)
  let request = HPACKHeaders(headers)
  let created = connection.eventLoop.makePromise(of: (any Channel).self)
  connection.eventLoop.execute {
    multiplexer.createStreamChannel(promise: created) { stream in
      stream.eventLoop.makeCompletedFuture {
        try stream.pipeline.syncOperations.addHandler(
          RawStreamHandler(request: request, body: body, reply: reply)
        )
      }
    }
  }
  _ = try await created.futureResult.get()
  return try await reply.futureResult.get()
}

/// Writes the request when the stream opens; gathers the reply until the stream ends.
private final class RawStreamHandler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTP2Frame.FramePayload
  typealias OutboundOut = HTTP2Frame.FramePayload

  private let request: HPACKHeaders
  private let body: [UInt8]?
  private let reply: EventLoopPromise<RawHTTP2Reply>
  private var headers: [String]?
  private var bytes: [UInt8] = []
  private var done = false

  init(request: HPACKHeaders, body: [UInt8]?, reply: EventLoopPromise<RawHTTP2Reply>) {
    self.request = request
    self.body = body
    self.reply = reply
  }

  func channelActive(context: ChannelHandlerContext) {
    let headers = HTTP2Frame.FramePayload.headers(
      .init(headers: self.request, endStream: self.body == nil)
    )
    context.write(self.wrapOutboundOut(headers), promise: nil)
    if let body = self.body {
      let data = HTTP2Frame.FramePayload.data(
        .init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)
      )
      context.write(self.wrapOutboundOut(data), promise: nil)
    }
    context.flush()
    context.fireChannelActive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch self.unwrapInboundIn(data) {
    case .headers(let frame):
      let lines = frame.headers.map { "\($0.name): \($0.value)" }
      if frame.endStream {
        self.finish(RawHTTP2Reply(headers: self.headers, body: self.bytes, trailers: lines))
      } else {
        self.headers = lines
      }
    case .data(let frame):
      if case .byteBuffer(let buffer) = frame.data { self.bytes += Array(buffer.readableBytesView) }
      if frame.endStream {
        self.finish(RawHTTP2Reply(headers: self.headers, body: self.bytes, trailers: []))
      }
    case .rstStream:
      self.finish(RawHTTP2Reply(headers: self.headers, body: self.bytes, trailers: [], reset: true))
    default:
      ()
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.finish(RawHTTP2Reply(headers: self.headers, body: self.bytes, trailers: [], reset: true))
    context.fireChannelInactive()
  }

  private func finish(_ reply: RawHTTP2Reply) {
    guard !self.done else { return }
    self.done = true
    self.reply.succeed(reply)
  }
}

/// A gRPC message: the 5-byte prefix (compressed flag, length) and the bytes.
func grpcFramed(_ message: [UInt8], compressedFlag: UInt8 = 0) -> [UInt8] {
  let length = UInt32(message.count)
  return [
    compressedFlag, UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF),
    UInt8(length & 0xFF),
  ]
    + message
}
