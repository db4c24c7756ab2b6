package import NIOCore
package import NIOHTTP1

/// Closes an HTTP/1.1 connection that has had no request in flight for `maxIdleTime` (`roster
/// serve --max-idle-s`, as `ConnectionManager` closes an idle HTTP/2 one): a keep-alive
/// connection a client forgot costs its socket only until then. (Shutting down is NIO's
/// pipelining handler's: it closes an idle connection at once and a busy one after its
/// response.) Sits after NIO's HTTP/1.1 server pipeline, where it sees each request's head
/// and each response's end.
final class HTTP1IdleHandler: ChannelDuplexHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias InboundOut = HTTPServerRequestPart
  typealias OutboundIn = HTTPServerResponsePart
  typealias OutboundOut = HTTPServerResponsePart

  private let maxIdleTime: TimeAmount
  private var inFlight = 0
  private var timer: Scheduled<Void>?

  init(maxIdleTime: TimeAmount) {
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

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    if case .end = self.unwrapOutboundIn(data) {
      self.inFlight = max(0, self.inFlight - 1)
      if self.inFlight == 0 { self.schedule(context: context) }
    }
    context.write(data, promise: promise)
  }

  private func schedule(context: ChannelHandlerContext) {
    self.timer?.cancel()
    let channel = context.channel
    self.timer = context.eventLoop.scheduleTask(in: self.maxIdleTime) {
      channel.close(promise: nil)
    }
  }
}
