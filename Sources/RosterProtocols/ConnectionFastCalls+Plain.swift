internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2

// Requests that are not gRPC and not streamed (the Connect protocol's and gRPC-Web's unary
// calls) at the connection: read whole, answered by `ConnectUnary`, written as HEADERS and
// one DATA frame.
extension ConnectionFastCalls {
  /// Hands a whole request that is not gRPC to `ConnectUnary`; its reply comes back on this
  /// loop, unless the stream was reset meanwhile.
  func servePlain(_ stream: HTTP2StreamID, _ reading: PlainReading, context: ChannelHandlerContext)
  {
    let request = PlainHTTPRequest(
      http1: false,
      method: reading.headers.first(name: ":method") ?? "",
      target: reading.headers.first(name: ":path") ?? "",
      headers: reading.headers,
      mediaType: reading.mediaType,
      body: reading.body
    )
    self.calls[stream] = .answering
    let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
    let loop = context.eventLoop
    let launched = self.connect.serve(
      request,
      peers: self.peers,
      eventLoop: loop,
      executor: self.executor
    ) { reply in
      loop.execute { handler.value.finishPlain(stream, reply) }
    }
    if let launched, case .answering? = self.calls[stream] {
      self.calls[stream] = .running(launched)
    }
  }

  private func finishPlain(_ stream: HTTP2StreamID, _ reply: PlainHTTPReply) {
    switch self.calls.removeValue(forKey: stream) {
    case .running(let launched)?: launched.ended()
    case .answering?: ()
    default: return
    }
    guard let context = self.context else { return }
    self.writePlain(stream, reply, context: context)
  }

  /// A reply as HEADERS (`:status`, its headers, `content-length`) and one DATA frame that
  /// ends the stream, or HEADERS alone when it has no body.
  func writePlain(_ stream: HTTP2StreamID, _ reply: PlainHTTPReply, context: ChannelHandlerContext)
  {
    var headers = HPACKHeaders()
    headers.add(name: ":status", value: String(reply.status))
    for (name, value) in reply.headers where name != "connection" {
      headers.add(name: name, value: value)
    }
    headers.add(name: "content-length", value: String(reply.body.readableBytes))
    let empty = reply.body.readableBytes == 0
    let head = HTTP2Frame(
      streamID: stream,
      payload: .headers(.init(headers: headers, endStream: empty))
    )
    context.write(self.wrapOutboundOut(head), promise: nil)
    if !empty {
      let data = HTTP2Frame(
        streamID: stream,
        payload: .data(.init(data: .byteBuffer(reply.body), endStream: true))
      )
      context.write(self.wrapOutboundOut(data), promise: nil)
    }
    context.flush()
  }
}
