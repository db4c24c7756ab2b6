internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP1
internal import RosterTransport

/// Serves the Connect protocol's unary calls (`ConnectUnary`) on an HTTP/1.1 connection, one
/// request at a time (NIO's pipelining helper holds the next until this one is answered).
///
/// A body is read up to the request size limit; past it the call is refused at once with
/// `resource_exhausted`, and the connection closes after a short drain
/// (`refuseOversizedBody`). A call still running when the connection goes is cancelled.
///
/// `@unchecked Sendable`: its state is touched only on the connection's event loop; a call's
/// reply reaches it through `NIOLoopBound`.
final class ConnectHTTP1Handler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  private let connect: ConnectUnary
  private let executor: EventLoopGroupExecutor
  private var peers = UnaryFastPath.Peers(nil)
  private var head: HTTPRequestHead?
  private var body = ByteBuffer()
  private var overLimit = false
  private var running: UnaryFastPath.LaunchedCall?
  private var context: ChannelHandlerContext?

  init(connect: ConnectUnary, executor: EventLoopGroupExecutor) {
    self.connect = connect
    self.executor = executor
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
    self.peers = UnaryFastPath.Peers(context.channel)
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.running?.cancel()
    self.running = nil
    self.context = nil
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.running?.cancel()
    self.running = nil
    context.fireChannelInactive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch self.unwrapInboundIn(data) {
    case .head(let head):
      self.head = head
      self.body.clear()
      self.overLimit = false
    case .body(var chunk):
      guard !self.overLimit else { return }
      if self.body.readableBytes + chunk.readableBytes > self.connect.fastPath.maxRequestBytes {
        self.refuseOversizedBody(context: context)
        return
      }
      self.body.writeBuffer(&chunk)
    case .end:
      guard let head = self.head else { return }
      self.head = nil
      guard !self.overLimit else { return }
      var headers = HPACKHeaders()
      for (name, value) in head.headers { headers.add(name: name.lowercased(), value: value) }
      let request = PlainHTTPRequest(http1: true, method: head.method.rawValue, target: head.uri, headers: headers, body: self.body)
      self.body = ByteBuffer()
      let keepAlive = head.isKeepAlive
      let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
      let loop = context.eventLoop
      self.running = self.connect.serve(request, peers: self.peers, eventLoop: loop, executor: self.executor) {
        reply in
        loop.execute {
          let this = handler.value
          this.running?.ended()
          this.running = nil
          guard let context = this.context else { return }
          this.write(reply, keepAlive: keepAlive, context: context)
        }
      }
    }
  }

  /// NIO's HTTP/1.1 decoder failed (its error handler has answered 400): the connection ends.
  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    context.close(promise: nil)
  }

  /// A body past the request limit is answered at once (`resource_exhausted`), whatever its
  /// length claims; the server then stops sending, reads and drops what the client is still
  /// sending for a moment (so the client reads the answer rather than a reset), and closes.
  private func refuseOversizedBody(context: ChannelHandlerContext) {
    self.overLimit = true
    self.body = ByteBuffer()
    let reply = ConnectUnary.errorReply(
      code: .resourceExhausted,
      message: "the request body is over the limit of \(self.connect.fastPath.maxRequestBytes) bytes",
      status: nil,
      metadata: []
    )
    self.write(reply, keepAlive: false, closing: false, context: context)
    let channel = context.channel
    channel.close(mode: .output, promise: nil)
    context.eventLoop.scheduleTask(in: Self.drainTime) { channel.close(promise: nil) }
  }

  /// How long a connection refused for an oversized body is read (and dropped) before it closes.
  static let drainTime = TimeAmount.seconds(2)

  private func write(_ reply: PlainHTTPReply, keepAlive: Bool, closing: Bool = true, context: ChannelHandlerContext) {
    var headers = HTTPHeaders(reply.headers)
    headers.replaceOrAdd(name: "content-length", value: String(reply.body.readableBytes))
    if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
    let status = HTTPResponseStatus(statusCode: reply.status)
    context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
    if reply.body.readableBytes > 0 {
      context.write(self.wrapOutboundOut(.body(.byteBuffer(reply.body))), promise: nil)
    }
    let written = context.eventLoop.makePromise(of: Void.self)
    context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: written)
    if closing && !keepAlive {
      let channel = context.channel
      written.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }
  }
}
