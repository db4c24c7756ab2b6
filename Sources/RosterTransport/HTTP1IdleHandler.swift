package import NIOCore
package import NIOHTTP1

/// Closes an HTTP/1.1 connection that has had no request in flight for `maxIdleTime` (`roster
/// serve --max-idle-s`, as `ConnectionManager` closes an idle HTTP/2 one): a keep-alive
/// connection a client forgot costs its socket only until then. When the server shuts down
/// (`ChannelShouldQuiesceEvent`), an idle connection closes at once and a busy one right after
/// its response. Sits after NIO's HTTP/1.1 server pipeline, where it sees each request's head
/// and each response's end.
final class HTTP1IdleHandler: ChannelDuplexHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias InboundOut = HTTPServerRequestPart
  typealias OutboundIn = HTTPServerResponsePart
  typealias OutboundOut = HTTPServerResponsePart

  private let maxIdleTime: TimeAmount?
  private var inFlight = 0
  /// The server is shutting down: close once no request is in flight.
  private var closing = false
  private var timer: Scheduled<Void>?

  init(maxIdleTime: TimeAmount?) {
    self.maxIdleTime = maxIdleTime
  }

  func handlerAdded(context: ChannelHandlerContext) {
    if context.channel.isActive { self.schedule(context: context) }
  }

  func channelActive(context: ChannelHandlerContext) {
    self.schedule(context: context)
    context.fireChannelActive()
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.timer?.cancel()
    self.timer = nil
  }

  func channelInactive(context: ChannelHandlerContext) {
    self.timer?.cancel()
    self.timer = nil
    context.fireChannelInactive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    if case .head = self.unwrapInboundIn(data) {
      self.inFlight += 1
      self.timer?.cancel()
      self.timer = nil
    }
    context.fireChannelRead(data)
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    guard event is ChannelShouldQuiesceEvent else {
      context.fireUserInboundEventTriggered(event)
      return
    }
    // Not passed on: the pipeline's tail would close the connection with its call in flight.
    self.closing = true
    if self.inFlight == 0 { context.close(promise: nil) }
  }

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    guard case .end = self.unwrapOutboundIn(data) else {
      context.write(data, promise: promise)
      return
    }
    self.inFlight = max(0, self.inFlight - 1)
    guard self.closing, self.inFlight == 0 else {
      if self.inFlight == 0 { self.schedule(context: context) }
      context.write(data, promise: promise)
      return
    }
    let written = context.eventLoop.makePromise(of: Void.self)
    written.futureResult.cascade(to: promise)
    let channel = context.channel
    written.futureResult.whenComplete { _ in channel.close(promise: nil) }
    context.write(data, promise: written)
    context.flush()
  }

  private func schedule(context: ChannelHandlerContext) {
    guard let maxIdleTime = self.maxIdleTime else { return }
    self.timer?.cancel()
    let channel = context.channel
    self.timer = context.eventLoop.scheduleTask(in: maxIdleTime) { channel.close(promise: nil) }
  }
}
