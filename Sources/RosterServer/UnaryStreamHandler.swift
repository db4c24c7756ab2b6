internal import CoreMetrics
internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import RosterServices
internal import Synchronization

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
    case running(CallCancellation<ServerContext.RPCCancellationHandle>, timer: Scheduled<Void>?)
    /// Answered, reset or closed.
    case done
    /// Not ours: grpc-swift's stream handler gets every frame.
    case passedOn
  }

  /// Calls to fast-path methods answered here, and those handed to grpc-swift because they
  /// were not plain (compressed, too large, not exactly one message, unusual headers).
  static let fastCalls = Counter(label: "roster_unary_fast_path_total", dimensions: [("path", "fast")])
  static let passedOnCalls = Counter(label: "roster_unary_fast_path_total", dimensions: [("path", "grpc_swift")])

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
      guard case .headers(let headers) = frame, let path = headers.headers.first(name: ":path"),
        let method = self.fastPath.methods[path]
      else {
        self.state = .passedOn
        context.fireChannelRead(data)
        return
      }
      guard self.fastPath.isPlain(headers.headers) else {
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
      guard let message = Self.singleMessage(in: Self.body(of: frames), limit: self.fastPath.maxRequestBytes)
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
    Self.passedOnCalls.increment()
    self.state = .passedOn
    for frame in frames {
      context.fireChannelRead(self.wrapInboundOut(frame))
    }
  }

  /// The body the DATA frames among `frames` carry: the one frame's own bytes when there is
  /// one (a request of up to 16 KiB), copied together only when there are several.
  private static func body(of frames: [HTTP2Frame.FramePayload]) -> ByteBuffer {
    var body: ByteBuffer?
    for case .data(let data) in frames {
      guard case .byteBuffer(var bytes) = data.data else { continue }
      if body == nil {
        body = bytes
      } else {
        body!.writeBuffer(&bytes)
      }
    }
    return body ?? ByteBuffer()
  }

  /// The message of a body that holds exactly one uncompressed length-prefixed message.
  private static func singleMessage(in body: ByteBuffer, limit: Int) -> ByteBuffer? {
    guard let flag = body.getInteger(at: body.readerIndex, as: UInt8.self), flag == 0,
      let length = body.getInteger(at: body.readerIndex + 1, as: UInt32.self),
      Int(length) <= limit, Int(length) == body.readableBytes - 5
    else { return nil }
    return body.getSlice(at: body.readerIndex + 5, length: Int(length))
  }

  private func start(
    _ method: UnaryFastPath.Method,
    headers: HPACKHeaders,
    message: ByteBuffer?,
    context: ChannelHandlerContext
  ) {
    Self.fastCalls.increment()
    let cancellation = CallCancellation<ServerContext.RPCCancellationHandle>()
    // The call's own task, which the server's default deadline cancels (`CallTaskCancelling`).
    let callTask = CallCancellation<Task<Void, Never>>()
    let loop = context.eventLoop
    var timer: Scheduled<Void>?
    if let timeout = headers.first(name: "grpc-timeout").flatMap(CallControlInterceptor.timeout) {
      // As grpc-swift's executor: when the client's deadline passes, the call is cancelled.
      timer = loop.scheduleTask(in: TimeAmount(timeout)) { cancellation.cancel() }
    }
    self.state = .running(cancellation, timer: timer)

    let metadata = Metadata(headers)
    let connection = context.channel.parent
    let remotePeer = connection.map { Self.describe($0.remoteAddress) } ?? "<unknown>"
    let localPeer = connection.map { Self.describe($0.localAddress) } ?? "<unknown>"
    let interceptors = self.fastPath.interceptors
    let handler = NIOLoopBound(self, eventLoop: loop)
    let body: @Sendable () async -> Void = {
      let outcome = await withServerContextRPCCancellationHandle { handle in
        cancellation.attach(handle)
        var context = ServerContext(
          descriptor: method.descriptor,
          remotePeer: remotePeer,
          localPeer: localPeer,
          cancellation: handle
        )
        context.transportSpecific = callTask
        return await method.run(message, metadata, context, interceptors)
      }
      if loop.inEventLoop {
        handler.value.finish(outcome)
      } else {
        loop.execute { handler.value.finish(outcome) }
      }
    }
    if method.onEventLoop {
      callTask.attach(Task(executorPreference: self.executor, operation: body))
    } else {
      callTask.attach(Task(operation: body))
    }
  }

  /// Writes the call's reply: HEADERS, a DATA frame per message, trailers; or trailers only
  /// when the call was refused before a response began.
  private func finish(_ outcome: UnaryOutcome) {
    guard case .running(_, let timer) = self.state, let context = self.context else { return }
    timer?.cancel()
    self.state = .done
    if let metadata = outcome.headers {
      var headers = HPACKHeaders()
      headers.reserveCapacity(2 + metadata.count)
      headers.add(name: ":status", value: "200")
      headers.add(name: "content-type", value: "application/grpc")
      headers.add(metadata)
      context.write(self.wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
      for message in outcome.messages {
        var framed = context.channel.allocator.buffer(capacity: 5 + message.readableBytes)
        framed.writeInteger(UInt8(0))
        framed.writeInteger(UInt32(message.readableBytes))
        framed.writeImmutableBuffer(message)
        context.write(self.wrapOutboundOut(.data(.init(data: .byteBuffer(framed)))), promise: nil)
      }
      let trailers = HPACKHeaders(status: outcome.status, metadata: outcome.trailers, trailersOnly: false)
      context.write(self.wrapOutboundOut(.headers(.init(headers: trailers, endStream: true))), promise: nil)
    } else {
      let trailers = HPACKHeaders(status: outcome.status, metadata: outcome.trailers, trailersOnly: true)
      context.write(self.wrapOutboundOut(.headers(.init(headers: trailers, endStream: true))), promise: nil)
    }
    context.flush()
  }

  private func cancelCall() {
    guard case .running(let cancellation, let timer) = self.state else { return }
    timer?.cancel()
    cancellation.cancel()
  }

  /// A peer as grpc-swift names it in `ServerContext` (`ipv4:127.0.0.1:5000`).
  private static func describe(_ address: SocketAddress?) -> String {
    switch address {
    case .v4(let ipv4)?: return "ipv4:\(ipv4.host):\(address?.port ?? 0)"
    case .v6(let ipv6)?: return "ipv6:[\(ipv6.host)]:\(address?.port ?? 0)"
    case .unixDomainSocket?: return "unix:\(address?.pathname ?? "<unknown>")"
    case nil: return "<unknown>"
    }
  }
}

/// Something of one call that can be cancelled: its `RPCCancellationHandle`, or its task.
protocol CancellableHandle: Sendable {
  func cancel()
}

extension ServerContext.RPCCancellationHandle: CancellableHandle {}
extension Task: CancellableHandle {}

/// The cancellation of one call's handle, which may be signalled before the handle exists (the
/// event loop, before the call's task has made its `RPCCancellationHandle`; the default deadline,
/// before the task is attached): a signal that comes first is kept and passed on at once.
final class CallCancellation<Handle: CancellableHandle>: Sendable {
  private enum State {
    case waiting
    case attached(Handle)
    case cancelled
  }
  private let state = Mutex(State.waiting)

  func attach(_ handle: Handle) {
    let cancelNow = self.state.withLock { state -> Bool in
      if case .cancelled = state { return true }
      state = .attached(handle)
      return false
    }
    if cancelNow { handle.cancel() }
  }

  func cancel() {
    let handle = self.state.withLock { state -> Handle? in
      defer { state = .cancelled }
      if case .attached(let handle) = state { return handle }
      return nil
    }
    handle?.cancel()
  }
}

extension CallCancellation: ServerContext.TransportSpecific, CallTaskCancelling where Handle == Task<Void, Never> {
  func cancelCallTask() {
    self.cancel()
  }
}

extension UnaryFastPath {
  /// Whether a call's request headers are what gRPC clients send for a call the fast path
  /// answers as grpc-swift would: `POST`, a scheme, a gRPC content type, no compression.
  func isPlain(_ headers: HPACKHeaders) -> Bool {
    guard headers.first(name: ":method") == "POST",
      let scheme = headers.first(name: ":scheme"), scheme == "http" || scheme == "https",
      let contentType = headers.first(name: "content-type"),
      contentType == "application/grpc" || contentType == "application/grpc+proto"
    else { return false }
    let encodings = headers[canonicalForm: "grpc-encoding"]
    return encodings.isEmpty || encodings == ["identity"]
  }
}

extension Metadata {
  /// Request metadata from HTTP/2 headers, as grpc-swift's transport makes it: every header,
  /// `-bin` values base64-decoded.
  fileprivate init(_ headers: HPACKHeaders) {
    self.init()
    self.reserveCapacity(headers.count)
    for (name, value, _) in headers {
      if name.hasSuffix("-bin"), let bytes = Data(base64Encoded: Self.padded(value)) {
        self.addBinary(Array(bytes), forKey: name)
      } else {
        self.addString(value, forKey: name)
      }
    }
  }

  private static func padded(_ base64: String) -> String {
    let remainder = base64.utf8.count % 4
    return remainder == 0 ? base64 : base64 + String(repeating: "=", count: 4 - remainder)
  }
}

extension HPACKHeaders {
  /// Custom metadata as headers: names lower-cased, binary values base64-encoded.
  fileprivate mutating func add(_ metadata: Metadata) {
    for (key, value) in metadata {
      switch value {
      case .string(let text): self.add(name: key.lowercased(), value: text)
      case .binary(let bytes): self.add(name: key.lowercased(), value: Data(bytes).base64EncodedString())
      }
    }
  }

  /// gRPC trailers: `grpc-status`, a percent-encoded `grpc-message`, the metadata; with
  /// `:status` and `content-type` first for a trailers-only reply.
  fileprivate init(status: Status, metadata: Metadata, trailersOnly: Bool) {
    self.init()
    self.reserveCapacity(4 + metadata.count)
    if trailersOnly {
      self.add(name: ":status", value: "200")
      self.add(name: "content-type", value: "application/grpc")
    }
    self.add(name: "grpc-status", value: String(status.code.rawValue))
    if !status.message.isEmpty {
      self.add(name: "grpc-message", value: Self.percentEncoded(status.message))
    }
    self.add(metadata)
  }

  /// gRPC's `grpc-message` encoding: bytes outside printable ASCII, and `%`, as `%XX`.
  private static func percentEncoded(_ message: String) -> String {
    let bytes = message.utf8
    if bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "%") }) { return message }
    var encoded = ""
    encoded.reserveCapacity(bytes.count * 3)
    for byte in bytes {
      if byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%") {
        encoded.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        encoded += String(format: "%%%02X", byte)
      }
    }
    return encoded
  }
}
