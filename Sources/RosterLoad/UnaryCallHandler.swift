internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import Synchronization

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
      self.wrapOutboundOut(
        HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
      ),
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
      promise.fail(
        self.goingAway
          ? NotTaken()
          : self.failure ?? RPCError(code: .unavailable, message: "the connection is not open")
      )
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
      call.timer = context.eventLoop.scheduleTask(
        in: .nanoseconds(Int64(timeout.milliseconds) * 1_000_000)
      ) {
        self.expire(streamID)
      }
    }
    self.calls[streamID] = call
    context.write(
      self.wrapOutboundOut(
        HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))
      ),
      promise: nil
    )
    context.write(
      self.wrapOutboundOut(
        HTTP2Frame(
          streamID: streamID,
          payload: .data(.init(data: .byteBuffer(body), endStream: true))
        )
      ),
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
        self.finish(
          frame.streamID,
          status: Self.grpcStatus(httpStatus: status),
          message: "HTTP status \(status)"
        )
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
      self.finish(
        frame.streamID,
        status: code == .cancel ? 1 : 14,
        message: "the server reset the stream (\(code))"
      )

    case .goAway(let lastStreamID, _, _):
      // Calls the server has taken still finish; later ones go to another connection.
      self.failure = RPCError(
        code: .unavailable,
        message: "the server is closing the connection (GOAWAY)"
      )
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
      self.wrapOutboundOut(
        HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
      ),
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
      call.promise.fail(
        RPCError(code: .internalError, message: "the response is not one uncompressed gRPC message")
      )
      return
    }
    call.promise.succeed(bytes)
  }

  private func expire(_ streamID: HTTP2StreamID) {
    guard self.calls[streamID] != nil, let context = self.context else { return }
    context.writeAndFlush(
      self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))),
      promise: nil
    )
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
