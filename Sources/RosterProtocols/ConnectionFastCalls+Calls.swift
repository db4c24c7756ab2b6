internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2

// A gRPC unary call the connection takes: started (answered in the read that brought it, in
// its store's point-call jobs, or in a task of its own), and its reply written.
extension ConnectionFastCalls {
  /// Starts a plain call of `method` whose request has been read whole.
  func start(
    _ stream: HTTP2StreamID,
    _ method: UnaryFastPath.Method,
    headers: HPACKHeaders,
    timeout: String?,
    message: ByteBuffer?,
    context: ChannelHandlerContext
  ) {
    UnaryFastPath.fastCalls.increment()
    let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
    // Answered, unless it turns out to run: a call answered at once finishes inside `start`.
    self.calls[stream] = .answered
    let launched = self.fastPath.start(
      method,
      headers: headers,
      timeout: timeout,
      message: message,
      peers: self.peers,
      format: .binary,
      eventLoop: context.eventLoop,
      executor: self.executor
    ) { outcome in
      handler.value.finish(stream, outcome)
    }
    if let launched { self.calls[stream] = .running(launched) }
  }

  /// Writes a call's reply, unless its stream was reset or the connection closed meanwhile.
  /// A call answered in the read that brought it (`Method.now`) keeps its stream's state until
  /// the stream closes, and its frames go out when the read completes (`channelReadComplete`),
  /// with the replies of the other calls it brought.
  private func finish(_ stream: HTTP2StreamID, _ outcome: UnaryOutcome) {
    guard let context = self.context else { return }
    switch self.calls[stream] {
    case .answered?:
      self.write(stream, outcome, context: context)
      self.unflushed = true
    case .running(let launched)?:
      self.calls[stream] = nil
      launched.ended()
      self.write(stream, outcome, context: context)
      context.flush()
    default:
      return
    }
  }

  private func write(
    _ stream: HTTP2StreamID,
    _ outcome: UnaryOutcome,
    context: ChannelHandlerContext
  ) {
    outcome.writeFrames(allocator: context.channel.allocator) { payload in
      context.write(
        self.wrapOutboundOut(HTTP2Frame(streamID: stream, payload: payload)),
        promise: nil
      )
    }
  }
}
