internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2

// The Connect protocol's and gRPC-Web's streamed calls at the connection (`ConnectStreams`):
// a call starts at its HEADERS, its DATA goes to it as it arrives, the stream's window is given
// back as the call reads, and its reply is written message by message.
extension ConnectionFastCalls {
  struct Streamed {
    var call: StreamedCall
    /// Window the client's DATA used that is not given back yet: held while the call has more
    /// than `streamedHighWater` bytes of messages it has not read.
    var owedWindow = 0
    var requestEnded = false
  }

  /// How many bytes of a streamed call's messages may wait unread before the client is made to
  /// wait (its stream's window is not given back).
  static let streamedHighWater = 64 * 1024

  /// A frame of a streamed call: its body goes to the call, the window back as the call reads.
  func readStreamed(
    _ stream: HTTP2StreamID,
    _ payload: HTTP2Frame.FramePayload,
    _ streamed: Streamed,
    context: ChannelHandlerContext
  ) {
    var streamed = streamed
    switch payload {
    case .rstStream:
      self.calls[stream] = nil
      streamed.call.cancel()
    case .data(let body):
      if case .byteBuffer(let bytes) = body.data {
        streamed.call.receive(bytes)
        streamed.owedWindow += bytes.readableBytes + (body.paddingBytes.map { $0 + 1 } ?? 0)
      }
      if body.endStream {
        streamed.requestEnded = true
        streamed.call.endOfRequest()
      } else {
        self.giveBackWindow(stream, &streamed, context: context)
      }
      self.calls[stream] = .streamed(streamed)
    case .headers(let trailers) where trailers.endStream:
      streamed.requestEnded = true
      streamed.call.endOfRequest()
      self.calls[stream] = .streamed(streamed)
    default:
      ()
    }
  }

  func startStreamed(
    _ stream: HTTP2StreamID,
    _ wire: ConnectStreams.WireProtocol,
    headers: HTTP2Frame.FramePayload.Headers,
    context: ChannelHandlerContext
  ) {
    let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
    let loop = context.eventLoop
    let sink = ReplySink(
      head: { pairs in loop.execute { handler.value.writeStreamedHead(stream, pairs) } },
      body: { bytes in
        let written = loop.makePromise(of: Void.self)
        loop.execute { handler.value.writeStreamedBody(stream, bytes, written) }
        try await written.futureResult.get()
      },
      end: { bytes in loop.execute { handler.value.endStreamed(stream, bytes) } }
    )
    switch self.streams.start(
      wire,
      headers: headers.headers,
      http1: false,
      peers: self.peers,
      sink: sink
    ) {
    case .refused(let reply):
      self.writePlain(stream, reply, context: context)
      if !headers.endStream { self.drain(stream) }
    case .started(let call):
      call.inbound.onTaken { _ in loop.execute { handler.value.messageTaken(stream) } }
      var streamed = Streamed(call: call)
      if headers.endStream {
        streamed.requestEnded = true
        call.endOfRequest()
      }
      self.calls[stream] = .streamed(streamed)
    }
  }

  /// Gives the client back the window its DATA used, unless the call has more unread than
  /// `streamedHighWater`: then the client waits until the call reads (`messageTaken`).
  func giveBackWindow(
    _ stream: HTTP2StreamID,
    _ streamed: inout Streamed,
    context: ChannelHandlerContext
  ) {
    guard streamed.owedWindow > 0, !streamed.requestEnded,
      streamed.call.inbound.queuedBytes < Self.streamedHighWater
    else { return }
    self.giveWindow(stream, streamed.owedWindow, context: context)
    streamed.owedWindow = 0
  }

  /// A WINDOW_UPDATE of `size` for `stream`, when there is any to give.
  func giveWindow(_ stream: HTTP2StreamID, _ size: Int, context: ChannelHandlerContext) {
    guard size > 0 else { return }
    let update = HTTP2Frame(streamID: stream, payload: .windowUpdate(windowSizeIncrement: size))
    context.writeAndFlush(self.wrapOutboundOut(update), promise: nil)
  }

  func messageTaken(_ stream: HTTP2StreamID) {
    guard case .streamed(var streamed)? = self.calls[stream], let context = self.context else {
      return
    }
    self.giveBackWindow(stream, &streamed, context: context)
    self.calls[stream] = .streamed(streamed)
  }

  func writeStreamedHead(_ stream: HTTP2StreamID, _ pairs: [(String, String)]) {
    guard case .streamed? = self.calls[stream], let context = self.context else { return }
    var headers = HPACKHeaders()
    headers.add(name: ":status", value: "200")
    for (name, value) in pairs { headers.add(name: name, value: value) }
    context.writeAndFlush(
      self.wrapOutboundOut(
        HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers)))
      ),
      promise: nil
    )
  }

  func writeStreamedBody(
    _ stream: HTTP2StreamID,
    _ bytes: ByteBuffer,
    _ written: EventLoopPromise<Void>
  ) {
    guard case .streamed? = self.calls[stream], let context = self.context else {
      written.fail(RPCError(code: .cancelled, message: "the client went away"))
      return
    }
    let data = HTTP2Frame(streamID: stream, payload: .data(.init(data: .byteBuffer(bytes))))
    context.writeAndFlush(self.wrapOutboundOut(data), promise: written)
  }

  /// The reply's last piece; a client still sending is told to stop.
  func endStreamed(_ stream: HTTP2StreamID, _ bytes: ByteBuffer) {
    guard case .streamed(let streamed)? = self.calls.removeValue(forKey: stream),
      let context = self.context
    else { return }
    let data = HTTP2Frame(
      streamID: stream,
      payload: .data(.init(data: .byteBuffer(bytes), endStream: true))
    )
    context.writeAndFlush(self.wrapOutboundOut(data), promise: nil)
    if !streamed.requestEnded {
      streamed.call.cancel()
      self.drain(stream)
    }
  }

  /// The most a client may still send of a request answered before it ended, and how long it
  /// may take: what a client has usually sent already (a stream's first window), read and
  /// dropped so that it finishes its upload and reads the answer as usual. Past either the
  /// client is told to stop, and the stream's state goes.
  static let drainLimit = 65_535
  static let drainTime = TimeAmount.milliseconds(500)

  /// Reads and drops the rest of a request answered before it ended (`Call.draining`).
  func drain(_ stream: HTTP2StreamID) {
    guard let context = self.context else { return }
    self.calls[stream] = .draining(left: Self.drainLimit)
    let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
    context.eventLoop.scheduleTask(in: Self.drainTime) {
      let this = handler.value
      guard case .draining? = this.calls[stream], let context = this.context else { return }
      this.calls[stream] = nil
      this.stopRequest(stream, context: context)
    }
  }

  /// Tells a client whose request was answered before it finished sending to stop (RST_STREAM
  /// NO_ERROR after the complete reply, RFC 9113 §8.1, as grpc-go's server does): for a body
  /// over the request limit, or past `drainLimit`. A client that waits to finish sending before
  /// it reads the end of the reply (curl 7.88 over HTTP/2) would otherwise wait until its own
  /// timeout; one whose upload had not ended when the reset came (curl 7.88 again) may report
  /// the reset as an error, which is why a short rest is drained instead.
  func stopRequest(_ stream: HTTP2StreamID, context: ChannelHandlerContext) {
    context.writeAndFlush(
      self.wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .rstStream(.noError))),
      promise: nil
    )
  }
}
