package import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2

/// One gRPC call on an HTTP/2 stream of Roster's own transport (`RosterHTTP2Transport`): frames
/// in, request parts out to `GRPCServer`; response parts in, frames out. The streams the
/// connection's `ConnectionFastCalls` does not answer itself come here: streaming calls, and
/// unary calls that are not plain.
///
/// It answers as grpc-swift's server stream handler does, status for status (the request
/// checks in the same order and with the same messages; `FastUnaryTests` compares the two
/// byte for byte): a content type that is not gRPC gets HTTP 415; a missing `:path`, a bad
/// `:scheme` or a method other than `POST` get `INVALID_ARGUMENT`; more than one
/// `grpc-encoding` gets `INTERNAL`; an encoding other than `identity`, `gzip` and `deflate`
/// gets `UNIMPLEMENTED` with `grpc-accept-encoding`; a `:path` that is not `/service/method`
/// gets `UNIMPLEMENTED`. Compressed messages are inflated (`MessageEncoding`), and responses
/// compressed when the client asked for it. A message that cannot be read ends the call with a
/// status naming why: over the size limit, before or after inflating, `RESOURCE_EXHAUSTED`;
/// compressed without an encoding, or not valid compressed data, `INTERNAL`. Unlike
/// grpc-swift, headers that end the stream end the request's messages at once.
///
/// A message that arrives in many DATA frames is gathered into one buffer, sized once its
/// length prefix is known, so reading it costs one copy however it is framed.
///
/// On the stream's event loop only.
final class GRPCStreamCodec: ChannelDuplexHandler {
  typealias InboundIn = HTTP2Frame.FramePayload
  typealias InboundOut = RPCRequestPart<BufferBytes>
  typealias OutboundIn = RPCResponsePart<BufferBytes>
  typealias OutboundOut = HTTP2Frame.FramePayload

  private enum Inbound {
    /// Before the request's headers.
    case idle
    /// Reading messages: the bytes of the next one so far.
    case open(ByteBuffer?)
    /// The client has sent all it will send, or the call was refused or failed.
    case closed
  }

  private enum Outbound {
    case idle
    /// The response's headers have been written.
    case open
    /// The status has been written (or the call was refused).
    case closed
  }

  private var inbound = Inbound.idle
  private var outbound = Outbound.idle
  private let maxPayloadSize: Int
  private let descriptor: EventLoopPromise<MethodDescriptor>
  private let descriptorsByPath: [String: MethodDescriptor]
  private var cancellation: ServerContext.RPCCancellationHandle?
  private var cancelled = false
  private var flushPending = false
  private var isReading = false
  /// The request's `grpc-encoding`, and the one responses are compressed with.
  private var requestEncoding: MessageEncoding?
  private var responseEncoding: MessageEncoding?

  /// - Parameter descriptor: succeeded with the call's method once its headers are accepted,
  ///   failed when the call is refused or the stream ends first.
  init(
    maxPayloadSize: Int,
    descriptorsByPath: [String: MethodDescriptor],
    descriptor: EventLoopPromise<MethodDescriptor>
  ) {
    self.maxPayloadSize = maxPayloadSize
    self.descriptorsByPath = descriptorsByPath
    self.descriptor = descriptor
  }

  /// The call's cancellation, once its task has made it; a cancellation that came first is
  /// passed on at once.
  func setCancellation(_ handle: ServerContext.RPCCancellationHandle) {
    if self.cancelled {
      handle.cancel()
    } else {
      self.cancellation = handle
    }
  }

  private func cancel() {
    self.cancelled = true
    self.cancellation?.cancel()
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.descriptor.fail(
      RPCError(code: .unavailable, message: "RPC stream was closed before we got any Metadata.")
    )
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    self.isReading = true
    switch self.unwrapInboundIn(data) {
    case .headers(let headers):
      self.receive(headers, context: context)
    case .data(let body):
      guard case .byteBuffer(let bytes) = body.data else { return }
      self.receive(bytes, endStream: body.endStream, context: context)
    case .rstStream:
      self.closedUnexpectedly(context: context)
    default:
      ()
    }
  }

  func channelReadComplete(context: ChannelHandlerContext) {
    self.isReading = false
    if self.flushPending {
      self.flushPending = false
      context.flush()
    }
    context.fireChannelReadComplete()
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.closedUnexpectedly(context: context)
    context.fireChannelInactive()
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    self.closedUnexpectedly(context: context, error: error)
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    // As grpc-swift's: a server shutting down cancels the calls it runs.
    if event is ChannelShouldQuiesceEvent { self.cancel() }
    context.fireUserInboundEventTriggered(event)
  }

  private func receive(_ headers: HTTP2Frame.FramePayload.Headers, context: ChannelHandlerContext) {
    guard case .idle = self.inbound else {
      // A second header block before the end of the stream is a protocol error (trailers
      // would end it; gRPC clients send none).
      guard !headers.endStream else { return self.endOfRequest(context: context) }
      self.inbound = .closed
      self.outbound = .closed
      context.writeAndFlush(self.wrapOutboundOut(.rstStream(.protocolError)), promise: nil)
      context.close(promise: nil)
      return
    }
    let fields = headers.headers
    if let refusal = Self.refusal(of: fields) {
      self.inbound = .closed
      self.outbound = .closed
      self.descriptor.fail(RPCError(code: .unavailable, message: "RPC was rejected."))
      self.write(.headers(.init(headers: refusal, endStream: true)), context: context)
      return
    }
    let path = fields.first(name: ":path")!
    guard let descriptor = self.descriptorsByPath[path] ?? MethodDescriptor(path: path) else {
      self.inbound = .closed
      self.outbound = .closed
      let status = Status(
        code: .unimplemented,
        message: "Requested RPC isn't implemented by this server."
      )
      self.descriptor.fail(RPCError(code: .unimplemented, message: status.message))
      let trailers = HPACKHeaders(status: status, metadata: [:], trailersOnly: true)
      self.write(.headers(.init(headers: trailers, endStream: true)), context: context)
      return
    }
    self.requestEncoding = fields.first(name: "grpc-encoding").flatMap(
      MessageEncoding.init(rawValue:)
    )
    self.responseEncoding = MessageEncoding.forResponses(
      request: fields,
      requestEncoding: self.requestEncoding,
      service: descriptor.service.fullyQualifiedService
    )
    self.inbound = .open(nil)
    self.descriptor.succeed(descriptor)
    context.fireChannelRead(self.wrapInboundOut(.metadata(Metadata(fields))))
    if headers.endStream { self.endOfRequest(context: context) }
  }

  private func receive(_ bytes: ByteBuffer, endStream: Bool, context: ChannelHandlerContext) {
    guard case .open(var pending) = self.inbound else { return }
    // Take the partial message out of the state first, and hold it in one variable only, so
    // that appending to it does not copy it (a copy per DATA frame made reading a 4 MB message
    // in 16 KB frames quadratic).
    self.inbound = .open(nil)
    var buffer: ByteBuffer
    if pending?.readableBytes ?? 0 > 0 {
      var bytes = bytes
      pending!.writeBuffer(&bytes)
      buffer = pending.take()!
    } else {
      buffer = bytes
    }
    while buffer.readableBytes >= 5 {
      let start = buffer.readerIndex
      let compressed = buffer.getInteger(at: start, as: UInt8.self)! != 0
      let length = Int(buffer.getInteger(at: start + 1, as: UInt32.self)!)
      guard length <= self.maxPayloadSize else {
        return self.fail(
          RPCError(
            code: .resourceExhausted,
            message:
              "the request message of \(length) bytes is over the limit of \(self.maxPayloadSize) bytes"
          ),
          context: context
        )
      }
      guard !compressed || self.requestEncoding != nil else {
        return self.fail(
          RPCError(
            code: .internalError,
            message: "a message is marked compressed but the request has no grpc-encoding"
          ),
          context: context
        )
      }
      guard buffer.readableBytes >= 5 + length else {
        // Make room for the whole message once, so the frames still to come are appended
        // without the buffer growing step by step.
        if buffer.readerIndex > 0 || buffer.capacity < 5 + length {
          var whole = context.channel.allocator.buffer(capacity: 5 + length)
          whole.writeBuffer(&buffer)
          buffer = whole
        }
        break
      }
      buffer.moveReaderIndex(forwardBy: 5)
      var message = buffer.readSlice(length: length)!
      if compressed, let encoding = self.requestEncoding {
        do {
          message = try encoding.decompress(
            message,
            limit: self.maxPayloadSize,
            allocator: context.channel.allocator
          )
        } catch {
          return self.fail(
            error as? RPCError ?? RPCError(code: .internalError, message: "\(error)"),
            context: context
          )
        }
      }
      context.fireChannelRead(self.wrapInboundOut(.message(BufferBytes(message))))
      guard case .open = self.inbound else { return }
    }
    self.inbound = .open(buffer.readableBytes > 0 ? buffer : nil)
    if endStream { self.endOfRequest(context: context) }
  }

  /// Ends the call for a message it cannot read: its status to the client (in trailers-only
  /// form when no response has begun), its cancellation and error to the server, then the
  /// stream's close (which resets the client's half if it is still sending).
  private func fail(_ error: RPCError, context: ChannelHandlerContext) {
    let outbound = self.outbound
    self.inbound = .closed
    self.outbound = .closed
    if case .closed = outbound {
    } else {
      let status = Status(code: Status.Code(error.code), message: error.message)
      let trailersOnly = if case .idle = outbound { true } else { false }
      let trailers = HPACKHeaders(status: status, metadata: [:], trailersOnly: trailersOnly)
      context.write(
        self.wrapOutboundOut(.headers(.init(headers: trailers, endStream: true))),
        promise: nil
      )
      context.flush()
    }
    self.cancel()
    context.fireErrorCaught(error)
    context.close(mode: .all, promise: nil)
  }

  /// The client has sent everything: what is left of a message is dropped, as grpc-swift does.
  private func endOfRequest(context: ChannelHandlerContext) {
    guard case .open = self.inbound else { return }
    self.inbound = .closed
    context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
  }

  private func closedUnexpectedly(context: ChannelHandlerContext, error: (any Error)? = nil) {
    let wasOpen: Bool
    switch (self.inbound, self.outbound) {
    case (.closed, .closed): wasOpen = false
    case (.idle, _): wasOpen = false
    default: wasOpen = true
    }
    self.inbound = .closed
    self.outbound = .closed
    guard wasOpen else { return }
    self.cancel()
    context.fireErrorCaught(
      error ?? RPCError(code: .unavailable, message: "Stream unexpectedly closed.")
    )
  }

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    switch self.unwrapOutboundIn(data) {
    case .metadata(let metadata):
      guard case .idle = self.outbound else {
        promise?.fail(
          RPCError(code: .internalError, message: "Response headers were already sent.")
        )
        return
      }
      self.outbound = .open
      var headers = HPACKHeaders(response: metadata)
      if let encoding = self.responseEncoding {
        headers.add(name: "grpc-encoding", value: encoding.rawValue)
      }
      context.write(self.wrapOutboundOut(.headers(.init(headers: headers))), promise: promise)

    case .message(let message):
      guard case .open = self.outbound else {
        promise?.fail(
          RPCError(code: .internalError, message: "A message must follow the response headers.")
        )
        return
      }
      let framed = context.channel.allocator.grpcMessage(
        message.buffer,
        encoding: self.responseEncoding
      )
      context.write(self.wrapOutboundOut(.data(.init(data: .byteBuffer(framed)))), promise: promise)

    case .status(let status, let metadata):
      let trailersOnly: Bool
      switch self.outbound {
      case .idle: trailersOnly = true
      case .open: trailersOnly = false
      case .closed:
        promise?.fail(
          RPCError(code: .internalError, message: "Can't write status, stream has already closed")
        )
        return
      }
      self.outbound = .closed
      let trailers = HPACKHeaders(status: status, metadata: metadata, trailersOnly: trailersOnly)
      context.write(
        self.wrapOutboundOut(.headers(.init(headers: trailers, endStream: true))),
        promise: promise
      )
    }
  }

  func flush(context: ChannelHandlerContext) {
    if self.isReading {
      self.flushPending = true
    } else {
      context.flush()
    }
  }

  /// A frame of the codec's own (a refusal), flushed at the end of the read.
  private func write(_ payload: HTTP2Frame.FramePayload, context: ChannelHandlerContext) {
    context.write(self.wrapOutboundOut(payload), promise: nil)
    self.flush(context: context)
  }
}
