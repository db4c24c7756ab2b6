package import NIOCore
package import NIOHTTP1

/// The clocks of an HTTP/1.1 connection:
/// - **Idle**: a connection with no request in flight and nothing arriving closes after
///   `maxIdleTime` (`roster serve --max-idle-s`, as `ConnectionManager` closes an idle HTTP/2
///   one): a keep-alive connection a client forgot costs its socket only until then.
/// - **Request head**: once a request's first bytes arrive, its whole head (request line and
///   headers) must arrive within `headTimeout`, or the connection closes: a client that sends
///   its headers a byte at a time (slowloris) holds its socket that long, not until the idle
///   time. Bytes of the next request that arrive while one is in flight start the clock when
///   that one's response ends.
///
/// (Shutting down is NIO's pipelining handler's: it closes an idle connection at once and a
/// busy one after its response.) The handler sits after NIO's HTTP/1.1 server pipeline, where
/// it sees each request's head and end and each response's end; its `ByteWatcher` sits before
/// the decoder, where it sees bytes arrive.
final class HTTP1IdleHandler: ChannelDuplexHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias InboundOut = HTTPServerRequestPart
  typealias OutboundIn = HTTPServerResponsePart
  typealias OutboundOut = HTTPServerResponsePart

  /// How long a request's head may take to arrive, from its first byte.
  static let defaultHeadTimeout = TimeAmount.seconds(10)

  private let maxIdleTime: TimeAmount?
  private let headTimeout: TimeAmount
  private var context: ChannelHandlerContext?
  private var inFlight = 0
  /// The request in flight has been read to its end.
  private var requestRead = false
  /// Bytes have arrived since the request in flight was read: the next one has begun.
  private var nextBegun = false
  private var idleTimer: Scheduled<Void>?
  private var headTimer: Scheduled<Void>?

  init(maxIdleTime: TimeAmount?, headTimeout: TimeAmount = HTTP1IdleHandler.defaultHeadTimeout) {
    self.maxIdleTime = maxIdleTime
    self.headTimeout = headTimeout
  }

  /// The handler that goes before the HTTP/1.1 decoder.
  func byteWatcher() -> ByteWatcher {
    ByteWatcher(owner: self)
  }

  /// Tells the connection's clocks that bytes arrived; passes them on as they are.
  final class ByteWatcher: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let owner: HTTP1IdleHandler

    fileprivate init(owner: HTTP1IdleHandler) {
      self.owner = owner
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
      self.owner.bytesArrived()
      context.fireChannelRead(data)
    }
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
    if context.channel.isActive { self.scheduleIdle() }
  }

  func channelActive(context: ChannelHandlerContext) {
    self.scheduleIdle()
    context.fireChannelActive()
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.cancelTimers()
    self.context = nil
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.cancelTimers()
    context.fireChannelInactive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch self.unwrapInboundIn(data) {
    case .head:
      self.inFlight += 1
      self.requestRead = false
      self.nextBegun = false
      self.cancelTimers()
    case .end:
      self.requestRead = true
    case .body:
      ()
    }
    context.fireChannelRead(data)
  }

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    if case .end = self.unwrapOutboundIn(data) {
      self.inFlight = max(0, self.inFlight - 1)
      if self.inFlight == 0 {
        self.scheduleIdle()
        if self.nextBegun { self.scheduleHead() }
      }
    }
    context.write(data, promise: promise)
  }

  fileprivate func bytesArrived() {
    if self.inFlight == 0 {
      self.scheduleHead()
    } else if self.requestRead {
      self.nextBegun = true
    }
  }

  private func scheduleIdle() {
    self.idleTimer?.cancel()
    self.idleTimer = self.maxIdleTime.flatMap { self.closing(after: $0) }
  }

  /// Starts the head's clock unless it runs already.
  private func scheduleHead() {
    guard self.headTimer == nil else { return }
    self.headTimer = self.closing(after: self.headTimeout)
  }

  private func closing(after time: TimeAmount) -> Scheduled<Void>? {
    guard let channel = self.context?.channel else { return nil }
    return channel.eventLoop.scheduleTask(in: time) { channel.close(promise: nil) }
  }

  private func cancelTimers() {
    self.idleTimer?.cancel()
    self.idleTimer = nil
    self.headTimer?.cancel()
    self.headTimer = nil
  }
}
