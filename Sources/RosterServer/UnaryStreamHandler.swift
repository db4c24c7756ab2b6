internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import RosterServices
internal import Synchronization
internal import RosterTransport

/// Sits first in each HTTP/2 stream's pipeline, ahead of grpc-swift's stream handler, and
/// answers a plain unary call to a `UnaryFastPath` method itself; any other stream it hands on
/// untouched, frame for frame.
///
/// A call is taken only when its headers are what gRPC clients send (`POST`, a gRPC
/// content type, a scheme, no compression) and its body is one uncompressed message within the
/// size limit; otherwise every frame read so far is passed on in order and grpc-swift answers,
/// with the statuses it gives today (415, `UNIMPLEMENTED` for compression, `RESOURCE_EXHAUSTED`
/// for size, and its status for a body without exactly one message). A call whose headers end
/// the stream is taken and answered as one without a message. The connection itself
/// stays grpc-swift's: settings, flow control, keepalive, idle and age limits, GOAWAY.
///
/// `@unchecked Sendable`: its state is touched only on the stream's event loop; the call's
/// task reaches it through `NIOLoopBound` and `EventLoop.execute`.
final class UnaryStreamHandler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTP2Frame.FramePayload
  typealias InboundOut = HTTP2Frame.FramePayload
  typealias OutboundOut = HTTP2Frame.FramePayload

  private enum State {
    /// Before the stream's first frame.
    case idle
    /// Reading a taken call's body: its frames so far (to pass on if it turns out not plain)
    /// and how many body bytes they hold.
    case reading(UnaryFastPath.Method, HPACKHeaders, frames: [HTTP2Frame.FramePayload], bodyBytes: Int)
    /// The call runs; it can still be cancelled.
    case running(UnaryFastPath.LaunchedCall)
    /// Answered, reset or closed.
    case done
    /// Not ours: grpc-swift's stream handler gets every frame.
    case passedOn
  }

  private let fastPath: UnaryFastPath
  private let executor: EventLoopGroupExecutor
  private var state = State.idle
  private var context: ChannelHandlerContext?

  init(fastPath: UnaryFastPath, executor: EventLoopGroupExecutor) {
    self.fastPath = fastPath
    self.executor = executor
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.cancelCall()
    self.context = nil
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    let frame = self.unwrapInboundIn(data)
    switch self.state {
    case .passedOn:
      context.fireChannelRead(data)

    case .idle:
      guard case .headers(let headers) = frame else {
        self.state = .passedOn
        context.fireChannelRead(data)
        return
      }
      let head = UnaryFastPath.RequestHead(headers.headers)
      guard let path = head.path, let method = self.fastPath.methods[path] else {
        self.state = .passedOn
        context.fireChannelRead(data)
        return
      }
      guard head.isPlain else {
        self.passOn([frame], context: context)
        return
      }
      if headers.endStream {
        // No message will come. grpc-swift would keep this call open until its deadline
        // (its stream handler never ends the inbound side); answered now, with the status
        // grpc-swift gives a body without a message.
        self.start(method, headers: headers.headers, message: nil, context: context)
        return
      }
      self.state = .reading(method, headers.headers, frames: [frame], bodyBytes: 0)

    case .reading(let method, let headers, var frames, let bodyBytes):
      frames.append(frame)
      guard case .data(let data) = frame, case .byteBuffer(let bytes) = data.data,
        bodyBytes + bytes.readableBytes <= self.fastPath.maxRequestBytes + 5
      else {
        self.passOn(frames, context: context)
        return
      }
      guard data.endStream else {
        self.state = .reading(method, headers, frames: frames, bodyBytes: bodyBytes + bytes.readableBytes)
        return
      }
      guard let message = UnaryFastPath.singleMessage(in: UnaryFastPath.body(of: frames), limit: self.fastPath.maxRequestBytes)
      else {
        self.passOn(frames, context: context)
        return
      }
      self.start(method, headers: headers, message: message, context: context)

    case .running:
      if case .rstStream = frame { self.cancelCall() }

    case .done:
      ()
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.cancelCall()
    context.fireChannelInactive()
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    // As grpc-swift's stream handler: a server shutting down cancels the calls it runs.
    if event is ChannelShouldQuiesceEvent { self.cancelCall() }
    context.fireUserInboundEventTriggered(event)
  }

  /// Gives grpc-swift's handler every frame of a fast-path method's call read so far, in
  /// order, and all later ones.
  private func passOn(_ frames: [HTTP2Frame.FramePayload], context: ChannelHandlerContext) {
    UnaryFastPath.passedOnCalls.increment()
    self.state = .passedOn
    for frame in frames {
      context.fireChannelRead(self.wrapInboundOut(frame))
    }
  }

  private func start(
    _ method: UnaryFastPath.Method,
    headers: HPACKHeaders,
    message: ByteBuffer?,
    context: ChannelHandlerContext
  ) {
    let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
    UnaryFastPath.fastCalls.increment()
    let call = self.fastPath.launch(
      method,
      headers: headers,
      timeout: headers.first(name: "grpc-timeout"),
      message: message,
      peers: UnaryFastPath.Peers(context.channel.parent),
      eventLoop: context.eventLoop,
      executor: self.executor
    ) { outcome in
      handler.value.finish(outcome)
    }
    self.state = .running(call)
  }

  /// Writes the call's reply: HEADERS, a DATA frame per message, trailers; or trailers only
  /// when the call was refused before a response began.
  private func finish(_ outcome: UnaryOutcome) {
    guard case .running(let call) = self.state, let context = self.context else { return }
    call.ended()
    self.state = .done
    outcome.writeFrames(allocator: context.channel.allocator) { payload in
      context.write(self.wrapOutboundOut(payload), promise: nil)
    }
    context.flush()
  }

  private func cancelCall() {
    guard case .running(let call) = self.state else { return }
    call.cancel()
  }
}

