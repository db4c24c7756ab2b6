package import NIOCore

/// Sends a connection's flushes to the socket once per turn of its event loop: the first flush
/// asks the loop to flush when the work already queued on it has run, and the flushes that come
/// before then join it. Calls that finish in the same turn (the streams of one read, on the
/// unary fast path) then leave in one `writev` rather than one each; a lone call waits for no
/// timer (unlike grpc-swift's flush coalescing, which holds a flush up to a delay).
///
/// First in the connection's pipeline (next to the socket). A close flushes what is pending
/// first, so nothing written before it is lost.
package final class TickFlushHandler: ChannelOutboundHandler, RemovableChannelHandler {
  package typealias OutboundIn = Any

  package init() {}

  private var flushPending = false

  package func flush(context: ChannelHandlerContext) {
    guard !self.flushPending else { return }
    self.flushPending = true
    let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
    context.eventLoop.execute {
      bound.value.handler.flushNow(context: bound.value.context)
    }
  }

  package func close(
    context: ChannelHandlerContext,
    mode: CloseMode,
    promise: EventLoopPromise<Void>?
  ) {
    self.flushNow(context: context)
    context.close(mode: mode, promise: promise)
  }

  private func flushNow(context: ChannelHandlerContext) {
    guard self.flushPending else { return }
    self.flushPending = false
    context.flush()
  }
}
