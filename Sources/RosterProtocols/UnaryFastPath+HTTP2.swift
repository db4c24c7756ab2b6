internal import CoreMetrics
internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import RosterDomain
internal import RosterServices
internal import RosterStore
internal import RosterTransport
internal import Synchronization

// The HTTP/2 side of the unary fast path, which `ConnectionFastCalls` runs at the connection:
// reading a request's body, starting a call, writing its reply.

extension UnaryFastPath {
  /// Calls to fast-path methods answered on the fast path, and those handed on to `GRPCServer`
  /// because they were not plain (compressed, too large, not exactly one message, unusual
  /// headers). gRPC calls only: the Connect protocol's and gRPC-Web's,
  /// which take the same call path, are counted by `roster_rpc_requests_total` alone.
  static let fastCalls = Counter(
    label: "roster_unary_fast_path_total",
    dimensions: [("path", "fast")]
  )
  static let passedOnCalls = Counter(
    label: "roster_unary_fast_path_total",
    dimensions: [("path", "grpc_swift")]
  )

  /// The body the DATA frames among `frames` carry: the one frame's own bytes when there is
  /// one (a request of up to 16 KiB), copied together only when there are several.
  static func body(of frames: [HTTP2Frame.FramePayload]) -> ByteBuffer {
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
  static func singleMessage(in body: ByteBuffer, limit: Int) -> ByteBuffer? {
    guard let flag = body.getInteger(at: body.readerIndex, as: UInt8.self), flag == 0,
      let length = body.getInteger(at: body.readerIndex + 1, as: UInt32.self),
      Int(length) <= limit, Int(length) == body.readableBytes - 5
    else { return nil }
    return body.getSlice(at: body.readerIndex + 5, length: Int(length))
  }

  /// A connection's two ends as `ServerContext` names them (`ipv4:127.0.0.1:50051`), made
  /// once per connection rather than per call.
  struct Peers: Sendable {
    let remote: String
    let local: String

    init(_ connection: (any Channel)?) {
      self.remote = connection.map { describePeer($0.remoteAddress) } ?? "<unknown>"
      self.local = connection.map { describePeer($0.localAddress) } ?? "<unknown>"
    }
  }

  /// One running call: its cancellation, and the client deadline's timer.
  struct LaunchedCall {
    let cancellation: CallCancellation
    let timer: Scheduled<Void>?

    /// The call is over: its reply is written, or nobody is left to read it.
    func ended() {
      self.timer?.cancel()
    }

    /// Cancels the call (its stream was reset or closed, or its connection went).
    func cancel() {
      self.timer?.cancel()
      self.cancellation.cancel()
    }
  }

  /// Starts a call of `method`, whatever protocol brought it, the one way each method runs: in
  /// its store's point-call jobs (`Method.pointCalls`), at once on the caller's thread
  /// (`Method.now`), or in a task of its own, unless its store refuses it first
  /// (`Method.admission`). A client deadline (`timeout`, the value of `grpc-timeout`) cancels
  /// it while it can be. `finish` gets the outcome: on the caller's thread before this returns
  /// for a call answered at once (and nil is returned), on `eventLoop` later for a running one
  /// (returned, to cancel when the client goes).
  func start(
    _ method: Method,
    headers: HPACKHeaders,
    timeout: String?,
    message: ByteBuffer?,
    peers: Peers,
    format: WireFormat,
    eventLoop: any EventLoop,
    executor: EventLoopGroupExecutor,
    finish: @escaping @Sendable (UnaryOutcome) -> Void
  ) -> LaunchedCall? {
    let timeout = timeout.flatMap(CallControlInterceptor.timeout)
    if let store = method.pointCalls {
      return self.launchPointCall(
        method,
        in: store,
        headers: headers,
        timeout: timeout,
        message: message,
        peers: peers,
        format: format,
        eventLoop: eventLoop,
        finish: finish
      )
    }
    if let outcome = self.answerNow(
      method,
      headers: headers,
      message: message,
      peers: peers,
      format: format
    ) {
      finish(outcome)
      return nil
    }
    if let store = method.admission, let timeout {
      let arrived = ContinuousClock.now
      if let refusal = store.refusal(dueBy: arrived + timeout) {
        finish(self.refuseNow(method, refusal, headers: headers, peers: peers, arrived: arrived))
        return nil
      }
    }
    return self.launch(
      method,
      headers: headers,
      timeout: timeout,
      message: message,
      peers: peers,
      format: format,
      eventLoop: eventLoop,
      executor: executor,
      finish: finish
    )
  }

  /// Starts one call in a task of its own: on `eventLoop` (through `executor`) for a point
  /// method, on the cooperative pool otherwise. A client deadline (`timeout`, from
  /// `grpc-timeout`) cancels it when it passes, as grpc-swift's executor does; `finish` gets
  /// the outcome on `eventLoop`.
  private func launch(
    _ method: Method,
    headers: HPACKHeaders,
    timeout: Duration?,
    message: ByteBuffer?,
    peers: Peers,
    format: WireFormat = .binary,
    eventLoop loop: any EventLoop,
    executor: EventLoopGroupExecutor,
    finish: @escaping @Sendable (UnaryOutcome) -> Void
  ) -> LaunchedCall {
    let cancellation = CallCancellation()
    // The call's own task, which the server's default deadline cancels (`CallTaskCancelling`);
    // its arrival, read before the timer below starts (`CallArrival`).
    let callTask = CallTask(arrived: .now)
    var timer: Scheduled<Void>?
    if let timeout {
      timer = loop.scheduleTask(in: TimeAmount(timeout)) { cancellation.cancel() }
    }
    let metadata = Metadata(headers)
    let chain = self.chain
    let body: @concurrent @Sendable () async -> Void = {
      let outcome = await withServerContextRPCCancellationHandle { handle in
        cancellation.attach(handle)
        var context = ServerContext(
          descriptor: method.descriptor,
          remotePeer: peers.remote,
          localPeer: peers.local,
          cancellation: handle
        )
        context.transportSpecific = callTask
        return await method.run(message, format, metadata, context, chain)
      }
      if loop.inEventLoop {
        finish(outcome)
      } else {
        loop.execute { finish(outcome) }
      }
    }
    if method.onEventLoop {
      callTask.task.attach(Task(executorPreference: executor.executor(for: loop), operation: body))
    } else {
      callTask.task.attach(Task(operation: body))
    }
    return LaunchedCall(cancellation: cancellation, timer: timer)
  }
}

extension UnaryFastPath {
  /// Runs a call of a method that answers without suspending (`Method.now`) on the caller's
  /// thread, to its end; nil for a method that does not. No task, and a cancellation handle
  /// that nothing signals: the call cannot be stopped once it runs. `arrived`: when a call that
  /// waited for its turn (`Method.pointCalls`) arrived, from which its duration counts;
  /// `timed`: whether it brought a `grpc-timeout`, which counts from then too.
  func answerNow(
    _ method: Method,
    headers: HPACKHeaders,
    message: ByteBuffer?,
    peers: Peers,
    arrived: ContinuousClock.Instant = .now,
    timed: Bool = false,
    format: WireFormat = .binary
  ) -> UnaryOutcome? {
    guard let now = method.now else { return nil }
    let context = Self.context(method, peers, timed ? arrived : nil)
    return now(message, format, Metadata(headers), context, arrived, self.chain)
  }

  /// The outcome of a call that `Method.pointCalls` refused before it ran (`error`: its store
  /// too busy, or the call cancelled while it waited), through the interceptors as if its
  /// handler had thrown it, so its logs and metrics are a refused call's.
  func refuseNow(
    _ method: Method,
    _ error: StoreError,
    headers: HPACKHeaders,
    peers: Peers,
    arrived: ContinuousClock.Instant
  ) -> UnaryOutcome {
    UnaryFastPath.refusedNow(
      RPCError(error),
      metadata: Metadata(headers),
      context: Self.context(method, peers, nil),
      arrived: arrived,
      chain: self.chain
    )
  }

  private static func context(
    _ method: Method,
    _ peers: Peers,
    _ arrived: ContinuousClock.Instant?
  ) -> ServerContext {
    var context = ServerContext(
      descriptor: method.descriptor,
      remotePeer: peers.remote,
      localPeer: peers.local,
      cancellation: ServerContext.RPCCancellationHandle()
    )
    if let arrived { context.transportSpecific = RosterHTTP2Transport.Arrival(arrived: arrived) }
    return context
  }

  /// Starts a call of a method whose `now` runs in its store's point-call jobs: queued there,
  /// and `finish` gets its outcome on `eventLoop`. A client deadline (`timeout`) or a reset
  /// cancels it while it waits; once it runs, it runs to its end.
  private func launchPointCall(
    _ method: Method,
    in store: any PointCalls,
    headers: HPACKHeaders,
    timeout: Duration?,
    message: ByteBuffer?,
    peers: Peers,
    format: WireFormat,
    eventLoop loop: any EventLoop,
    finish: @escaping @Sendable (UnaryOutcome) -> Void
  ) -> LaunchedCall {
    let cancellation = CallCancellation()
    let arrived = ContinuousClock.now
    let timer = timeout.map { timeout in
      loop.scheduleTask(in: TimeAmount(timeout)) { cancellation.cancel() }
    }
    let timed = timer != nil
    let cancel = store.runPointCall(
      deadline: timeout.map { arrived + $0 },
      { [self] in
        let outcome = self.answerNow(
          method,
          headers: headers,
          message: message,
          peers: peers,
          arrived: arrived,
          timed: timed,
          format: format
        )!
        loop.execute { finish(outcome) }
      },
      stopped: { [self] error in
        loop.execute {
          finish(self.refuseNow(method, error, headers: headers, peers: peers, arrived: arrived))
        }
      }
    )
    cancellation.attach(PointCallCancel(signal: cancel))
    return LaunchedCall(cancellation: cancellation, timer: timer)
  }
}

/// How a queued point call is cancelled (`PointCalls.runPointCall`'s closure).
private struct PointCallCancel: CancellableHandle {
  let signal: @Sendable () -> Void
  func cancel() { self.signal() }
}

extension UnaryOutcome {
  /// The reply as HTTP/2 frames: HEADERS, a DATA frame per message, trailers; or trailers only
  /// when the call was refused before a response began.
  func writeFrames(allocator: ByteBufferAllocator, _ write: (HTTP2Frame.FramePayload) -> Void) {
    guard let metadata = self.headers else {
      let trailers = HPACKHeaders(status: self.status, metadata: self.trailers, trailersOnly: true)
      write(.headers(.init(headers: trailers, endStream: true)))
      return
    }
    write(.headers(.init(headers: HPACKHeaders(response: metadata))))
    for message in self.messages {
      write(.data(.init(data: .byteBuffer(allocator.grpcMessage(message)))))
    }
    let trailers = HPACKHeaders(status: self.status, metadata: self.trailers, trailersOnly: false)
    write(.headers(.init(headers: trailers, endStream: true)))
  }
}

extension RosterHTTP2Transport.Arrival: CallArrival {}

extension UnaryFastPath {
  /// What the fast path reads of a call's request headers, found in one pass rather than a
  /// search of the block for each (which showed in callgrind's count of a `Health.Check`). Names
  /// are lowercase: both transports refuse a block with any other (`RequestHeaderCheck`,
  /// swift-nio-http2's check).
  struct RequestHead {
    private(set) var method: String?
    private(set) var scheme: String?
    private(set) var path: String?
    private(set) var contentType: String?
    /// `grpc-timeout`.
    private(set) var timeout: String?
    /// Whether `grpc-encoding` is absent, or is `identity` once.
    private(set) var uncompressed = true
    private var encodings = 0

    init(_ headers: HPACKHeaders) {
      for header in headers {
        switch header.name {
        case ":method": if self.method == nil { self.method = header.value }
        case ":scheme": if self.scheme == nil { self.scheme = header.value }
        case ":path": if self.path == nil { self.path = header.value }
        case "content-type": if self.contentType == nil { self.contentType = header.value }
        case "grpc-timeout": if self.timeout == nil { self.timeout = header.value }
        case "grpc-encoding":
          self.encodings += 1
          self.uncompressed = self.encodings == 1 && header.value == "identity"
        default: break
        }
      }
    }

    /// Whether the request is gRPC (`application/grpc`, `+proto` and the like, not gRPC-Web).
    var isGRPC: Bool {
      guard let contentType = self.contentType else { return false }
      return contentType.hasPrefix("application/grpc")
        && !contentType.hasPrefix("application/grpc-web")
    }

    /// Whether the call is what gRPC clients send for a call the fast path answers as
    /// grpc-swift would: `POST`, a scheme, a gRPC content type, no compression.
    var isPlain: Bool {
      guard self.method == "POST", self.scheme == "http" || self.scheme == "https",
        self.contentType == "application/grpc" || self.contentType == "application/grpc+proto"
      else { return false }
      return self.uncompressed
    }
  }
}
