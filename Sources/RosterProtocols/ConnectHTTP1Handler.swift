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
package final class ConnectHTTP1Handler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  private let connect: ConnectUnary
  private let streams: ConnectStreams
  private let executor: EventLoopGroupExecutor
  private var peers = UnaryFastPath.Peers(nil)
  private var head: HTTPRequestHead?
  private var body = ByteBuffer()
  private var overLimit = false
  private var running: UnaryFastPath.LaunchedCall?
  /// A streamed call (`ConnectStreams`) whose reply is being written.
  private var streamed: StreamedCall?
  private var context: ChannelHandlerContext?

  package init(connect: ConnectUnary, streams: ConnectStreams, executor: EventLoopGroupExecutor) {
    self.connect = connect
    self.streams = streams
    self.executor = executor
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
    self.peers = UnaryFastPath.Peers(context.channel)
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.running?.cancel()
    self.running = nil
    self.streamed?.cancel()
    self.streamed = nil
    self.context = nil
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.running?.cancel()
    self.running = nil
    self.streamed?.cancel()
    self.streamed = nil
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
      let mediaType: String
      switch self.streams.route(contentType: headers.first(name: "content-type"), path: head.uri) {
      case .streamed(let wire):
        self.startStreamed(wire, head: head, headers: headers, context: context)
        return
      case .whole(let type): mediaType = type
      }
      let request = PlainHTTPRequest(
        http1: true,
        method: head.method.rawValue,
        target: head.uri,
        headers: headers,
        mediaType: mediaType,
        body: self.body
      )
      self.body = ByteBuffer()
      let keepAlive = head.isKeepAlive
      let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
      let loop = context.eventLoop
      self.running = self.connect.serve(
        request,
        peers: self.peers,
        eventLoop: loop,
        executor: self.executor
      ) {
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

  /// `headers` with HTTP/2's `:method` and `:path`, as `ConnectStreams` reads a request.
  private static func withPseudoHeaders(
    _ headers: HPACKHeaders,
    _ head: HTTPRequestHead
  ) -> HPACKHeaders {
    var withPseudo = HPACKHeaders([(":method", head.method.rawValue), (":path", head.uri)])
    withPseudo.add(contentsOf: headers)
    return withPseudo
  }

  /// A streamed call over HTTP/1.1: its request body is already whole (within the request
  /// limit: HTTP/1.1 carries a client stream as one body); its reply is written in chunks,
  /// each message flushed as the call writes it.
  private func startStreamed(
    _ wire: ConnectStreams.WireProtocol,
    head: HTTPRequestHead,
    headers: HPACKHeaders,
    context: ChannelHandlerContext
  ) {
    let keepAlive = head.isKeepAlive
    let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
    let loop = context.eventLoop
    let sink = ReplySink(
      head: { pairs in
        loop.execute {
          guard let context = handler.value.context else { return }
          var headers = HTTPHeaders(pairs)
          if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
          let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)
          context.writeAndFlush(handler.value.wrapOutboundOut(.head(head)), promise: nil)
        }
      },
      body: { bytes in
        let written = loop.makePromise(of: Void.self)
        loop.execute {
          guard let context = handler.value.context, handler.value.streamed != nil else {
            written.fail(RPCError(code: .cancelled, message: "the client went away"))
            return
          }
          context.writeAndFlush(
            handler.value.wrapOutboundOut(.body(.byteBuffer(bytes))),
            promise: written
          )
        }
        try await written.futureResult.get()
      },
      end: { bytes in
        loop.execute {
          let this = handler.value
          guard let context = this.context, this.streamed != nil else { return }
          this.streamed = nil
          if bytes.readableBytes > 0 {
            context.write(this.wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
          }
          let written = loop.makePromise(of: Void.self)
          context.writeAndFlush(this.wrapOutboundOut(.end(nil)), promise: written)
          if !keepAlive {
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
          }
        }
      }
    )
    let body = self.body
    self.body = ByteBuffer()
    let full = Self.withPseudoHeaders(headers, head)
    switch self.streams.start(wire, headers: full, http1: true, peers: self.peers, sink: sink) {
    case .refused(let reply):
      self.write(reply, keepAlive: keepAlive, context: context)
    case .started(let call):
      self.streamed = call
      call.receive(body)
      call.endOfRequest()
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
      message:
        "the request body is over the limit of \(self.connect.fastPath.maxRequestBytes) bytes",
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

  private func write(
    _ reply: PlainHTTPReply,
    keepAlive: Bool,
    closing: Bool = true,
    context: ChannelHandlerContext
  ) {
    var headers = HTTPHeaders(reply.headers)
    headers.replaceOrAdd(name: "content-length", value: String(reply.body.readableBytes))
    if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
    let status = HTTPResponseStatus(statusCode: reply.status)
    context.write(
      self.wrapOutboundOut(
        .head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))
      ),
      promise: nil
    )
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
