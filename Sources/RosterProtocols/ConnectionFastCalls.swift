internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import RosterTransport

/// Answers the unary fast path's calls at the HTTP/2 connection, on Roster's own transport
/// (`RosterHTTP2Transport`): their frames never reach the stream multiplexer, so such a call
/// gets no child channel, no stream pipeline and no task but its own (none at all for a method
/// that answers without waiting: `Method.now`). A request that is not
/// gRPC (the Connect protocol, gRPC-Web) is read whole here too and answered by
/// `ConnectUnary`. Frames of every other stream go on to the multiplexer untouched, where
/// `GRPCStreamCodec` serves them through `GRPCServer`.
///
/// A call is taken when it is plain (plain headers; one uncompressed message within the size
/// limit); otherwise every
/// frame read so far is passed on in order, and the multiplexer opens the stream as if it had
/// seen them first.
///
/// Sits between `NIOHTTP2Handler` and `HTTP2StreamMultiplexer`. `@unchecked Sendable`: its
/// state is touched only on the connection's event loop; a call's task, or its store's lane,
/// reaches it through `NIOLoopBound`.
package final class ConnectionFastCalls: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTP2Frame
  typealias InboundOut = HTTP2Frame
  typealias OutboundOut = HTTP2Frame

  enum Call {
    /// Reading the body: the frames so far and the stream's creation event (to pass on if it
    /// turns out not plain: the multiplexer activates a stream's channel on that event, which
    /// `NIOHTTP2Handler` fires after the stream's first frame), and how many body bytes they hold.
    case reading(Reading)
    /// The call runs; it can still be cancelled.
    case running(UnaryFastPath.LaunchedCall)
    /// Answered in the read that brought it (`Method.now`, on the event loop): its stream's
    /// remaining events stay here until it closes.
    case answered
    /// Reading a request that is not gRPC (the Connect protocol): its headers and body so far.
    case readingPlain(PlainReading)
    /// A request that is not gRPC, handed to `ConnectUnary`, not yet running or answered.
    case answering
    /// A streamed Connect or gRPC-Web call (`ConnectStreams`): its request's body goes to it as
    /// it arrives.
    case streamed(Streamed)
    /// Answered before its request ended: the rest of the request is read and dropped, at most
    /// this many more bytes, before the client is told to stop (`drain`).
    case draining(left: Int)
  }

  struct PlainReading {
    var headers: HPACKHeaders
    /// The content type's media type, as the request's route read it.
    var mediaType: String
    var body = ByteBuffer()
  }

  struct Reading {
    var method: UnaryFastPath.Method
    var headers: HPACKHeaders
    /// The request's `grpc-timeout`.
    var timeout: String?
    var frames: [HTTP2Frame.FramePayload]
    var created: NIOHTTP2StreamCreatedEvent?
    var bodyBytes = 0
  }

  let fastPath: UnaryFastPath
  let connect: ConnectUnary
  let streams: ConnectStreams
  let executor: EventLoopGroupExecutor
  /// The fast calls of this connection, by stream.
  var calls: [HTTP2StreamID: Call] = [:]
  /// The open streams the multiplexer was told of (their creation event passed on): only
  /// their flow-control and closing events go on to it, not those of this handler's calls.
  private var multiplexed: Set<HTTP2StreamID> = []
  /// The connection's inbound window in the last of its window events passed on.
  private var connectionInboundWindow: Int?
  /// The highest stream the client has opened: a HEADERS frame above it opens a new stream.
  private var lastStreamID = HTTP2StreamID(0)
  var context: ChannelHandlerContext?
  /// Whether replies were written in this read (calls answered without a task) and not flushed.
  var unflushed = false
  /// The connection's ends, for each call's `ServerContext`.
  var peers = UnaryFastPath.Peers(nil)

  package init(
    fastPath: UnaryFastPath,
    connect: ConnectUnary,
    streams: ConnectStreams,
    executor: EventLoopGroupExecutor
  ) {
    self.fastPath = fastPath
    self.connect = connect
    self.streams = streams
    self.executor = executor
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
    self.peers = UnaryFastPath.Peers(context.channel)
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.cancelAll()
    self.context = nil
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    let frame = self.unwrapInboundIn(data)
    let stream = frame.streamID
    guard let call = self.calls[stream] else {
      if stream > self.lastStreamID, case .headers(let headers) = frame.payload {
        self.lastStreamID = stream
        self.open(stream, headers: headers, data: data, context: context)
      } else {
        context.fireChannelRead(data)
      }
      return
    }
    switch call {
    case .reading(var reading):
      switch frame.payload {
      case .rstStream:
        // The client gave up before the call started.
        self.calls[stream] = nil
        return
      case .windowUpdate:
        // More room for the reply (`NIOHTTP2Handler` has counted it): nothing to keep.
        return
      default:
        ()
      }
      reading.frames.append(frame.payload)
      guard case .data(let body) = frame.payload, case .byteBuffer(let bytes) = body.data,
        reading.bodyBytes + bytes.readableBytes <= self.fastPath.maxRequestBytes + 5
      else {
        self.passOn(stream, reading, context: context)
        return
      }
      guard body.endStream else {
        reading.bodyBytes += bytes.readableBytes
        self.calls[stream] = .reading(reading)
        // The stream's window, given back as it is read (the multiplexer's child channels do
        // the same for the streams they own; the connection's window is the multiplexer's).
        self.giveWindow(
          stream,
          bytes.readableBytes + (body.paddingBytes.map { $0 + 1 } ?? 0),
          context: context
        )
        return
      }
      guard
        let message = UnaryFastPath.singleMessage(
          in: UnaryFastPath.body(of: reading.frames),
          limit: self.fastPath.maxRequestBytes
        )
      else {
        self.passOn(stream, reading, context: context)
        return
      }
      self.start(
        stream,
        reading.method,
        headers: reading.headers,
        timeout: reading.timeout,
        message: message,
        context: context
      )

    case .running(let launched):
      if case .rstStream = frame.payload {
        self.calls[stream] = nil
        launched.cancel()
      }

    case .readingPlain(var reading):
      switch frame.payload {
      case .rstStream:
        self.calls[stream] = nil
      case .data(let body):
        guard case .byteBuffer(var bytes) = body.data else { return }
        let consumed = bytes.readableBytes + (body.paddingBytes.map { $0 + 1 } ?? 0)
        guard reading.body.readableBytes + bytes.readableBytes <= self.fastPath.maxRequestBytes
        else {
          // Answered now; the client is told to stop sending (RST_STREAM NO_ERROR after the
          // reply, RFC 9113 §8.1).
          self.calls[stream] = nil
          let reply = ConnectUnary.errorReply(
            code: .resourceExhausted,
            message: "the request body is over the limit of \(self.fastPath.maxRequestBytes) bytes",
            status: nil,
            metadata: []
          )
          self.writePlain(stream, reply, context: context)
          self.stopRequest(stream, context: context)
          return
        }
        reading.body.writeBuffer(&bytes)
        if body.endStream {
          self.servePlain(stream, reading, context: context)
        } else {
          self.calls[stream] = .readingPlain(reading)
          self.giveWindow(stream, consumed, context: context)
        }
      case .headers(let trailers) where trailers.endStream:
        self.servePlain(stream, reading, context: context)
      default:
        ()
      }

    case .answering, .answered:
      if case .rstStream = frame.payload { self.calls[stream] = nil }

    case .draining(let left):
      switch frame.payload {
      case .data(let body):
        let consumed = body.data.readableBytes + (body.paddingBytes.map { $0 + 1 } ?? 0)
        if body.endStream {
          self.calls[stream] = nil
        } else if consumed > left {
          self.calls[stream] = nil
          self.stopRequest(stream, context: context)
        } else {
          self.calls[stream] = .draining(left: left - consumed)
          self.giveWindow(stream, consumed, context: context)
        }
      case .headers(let trailers) where trailers.endStream:
        self.calls[stream] = nil
      case .rstStream:
        self.calls[stream] = nil
      default:
        ()
      }

    case .streamed(let streamed):
      self.readStreamed(stream, frame.payload, streamed, context: context)
    }
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    // Told apart by their types, not by a failed cast for each case (`ConnectionEvent`).
    switch ConnectionEvent(event) {
    case .windowUpdated:
      let updated = event as! NIOHTTP2WindowUpdatedEvent
      // A flow-control event goes on to the multiplexer for the connection's own window, which
      // it manages, and for the streams it was told of; one of this handler's calls stays here.
      if updated.streamID == .rootStream {
        // The multiplexer reads only the connection's inbound window, to give it back: an event
        // that leaves it as last passed on (DATA moving the outbound one) would change nothing
        // there, and costs a few failed casts in it.
        guard updated.inboundWindowSize != self.connectionInboundWindow else { return }
        self.connectionInboundWindow = updated.inboundWindowSize
        context.fireUserInboundEventTriggered(event)
      } else if self.multiplexed.contains(updated.streamID) {
        context.fireUserInboundEventTriggered(event)
      }
      return
    case .streamCreated(let created):
      switch self.calls[created.streamID] {
      case .reading(var reading)?:
        reading.created = created
        self.calls[created.streamID] = .reading(reading)
        return
      case .running?, .answered?, .readingPlain?, .answering?, .streamed?, .draining?:
        return
      case nil:
        self.multiplexed.insert(created.streamID)
      }
    case .streamClosed(let closed):
      // Ended, reset by the client, or by the connection's own error handling: the call is
      // over. A stream of this handler's never reached the multiplexer: its end stays here.
      switch self.calls.removeValue(forKey: closed.streamID) {
      case .running(let launched)?:
        launched.cancel()
        return
      case .streamed(let streamed)?:
        streamed.call.cancel()
        return
      case .some:
        return
      case nil:
        // A fast call that has answered: its stream is gone from `calls` already.
        guard self.multiplexed.remove(closed.streamID) != nil else { return }
      }
    case .quiesce:
      // As grpc-swift's stream handler: a server shutting down cancels the calls it runs; each
      // still answers with the status its cancellation gives.
      for case .running(let launched) in self.calls.values {
        launched.cancellation.cancel()
      }
    case .other:
      ()
    }
    context.fireUserInboundEventTriggered(event)
  }

  func channelReadComplete(context: ChannelHandlerContext) {
    if self.unflushed {
      self.unflushed = false
      context.flush()
    }
    context.fireChannelReadComplete()
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.cancelAll()
    context.fireChannelInactive()
  }

  /// A new stream's HEADERS: a fast-path method's plain call is taken, anything else goes on.
  private func open(
    _ stream: HTTP2StreamID,
    headers: HTTP2Frame.FramePayload.Headers,
    data: NIOAny,
    context: ChannelHandlerContext
  ) {
    let head = UnaryFastPath.RequestHead(headers.headers)
    if !head.isGRPC {
      let mediaType: String
      switch self.streams.route(contentType: head.contentType, path: head.path ?? "") {
      case .streamed(let wire):
        self.startStreamed(stream, wire, headers: headers, context: context)
        return
      case .whole(let type): mediaType = type
      }
      let reading = PlainReading(headers: headers.headers, mediaType: mediaType)
      if headers.endStream {
        self.servePlain(stream, reading, context: context)
      } else {
        self.calls[stream] = .readingPlain(reading)
      }
      return
    }
    guard let path = head.path, let method = self.fastPath.methods[path] else {
      context.fireChannelRead(data)
      return
    }
    guard head.isPlain else {
      UnaryFastPath.passedOnCalls.increment()
      context.fireChannelRead(data)
      return
    }
    if headers.endStream {
      // No message will come: answered now, as a call without a message.
      self.start(
        stream,
        method,
        headers: headers.headers,
        timeout: head.timeout,
        message: nil,
        context: context
      )
    } else {
      self.calls[stream] = .reading(
        Reading(
          method: method,
          headers: headers.headers,
          timeout: head.timeout,
          frames: [.headers(headers)]
        )
      )
    }
  }

  /// Gives the multiplexer every frame of a stream read so far, in order, then the stream's
  /// creation event; later frames follow as frames of a stream this handler does not know.
  private func passOn(_ stream: HTTP2StreamID, _ reading: Reading, context: ChannelHandlerContext) {
    UnaryFastPath.passedOnCalls.increment()
    self.calls[stream] = nil
    for payload in reading.frames {
      context.fireChannelRead(self.wrapInboundOut(HTTP2Frame(streamID: stream, payload: payload)))
    }
    if let created = reading.created {
      self.multiplexed.insert(stream)
      context.fireUserInboundEventTriggered(created)
    }
  }

  private func cancelAll() {
    let calls = self.calls
    self.calls.removeAll()
    for call in calls.values {
      switch call {
      case .running(let launched): launched.cancel()
      case .streamed(let streamed): streamed.call.cancel()
      default: ()
      }
    }
  }
}
