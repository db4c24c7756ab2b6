package import NIOCore

/// Tells an HTTP/2 connection from an HTTP/1.1 one by its first bytes (after TLS, if any):
/// HTTP/2 opens with its connection preface (RFC 9113 §3.4), HTTP/1.1 with a request line.
/// It reads until the bytes so far either differ from the preface or hold all of it, then
/// has the pipeline configured for that version, passes on what it read, and leaves.
///
/// A connection that says nothing for `timeout` is closed: it has no version yet, so no
/// idle limit of either version watches it.
final class HTTPVersionDetector: ChannelInboundHandler, RemovableChannelHandler {
  typealias InboundIn = ByteBuffer
  typealias InboundOut = ByteBuffer

  enum Version {
    case http1
    case http2
  }

  static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

  private let configure: (Version, any Channel) throws -> Void
  private let timeout: TimeAmount
  private var buffered: ByteBuffer?
  private var timer: Scheduled<Void>?

  init(timeout: TimeAmount, configure: @escaping (Version, any Channel) throws -> Void) {
    self.timeout = timeout
    self.configure = configure
  }

  func handlerAdded(context: ChannelHandlerContext) {
    if context.channel.isActive { self.startTimer(context: context) }
  }

  func channelActive(context: ChannelHandlerContext) {
    self.startTimer(context: context)
    context.fireChannelActive()
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.timer?.cancel()
  }

  private func startTimer(context: ChannelHandlerContext) {
    guard self.timer == nil else { return }
    let channel = context.channel
    self.timer = context.eventLoop.scheduleTask(in: self.timeout) { channel.close(promise: nil) }
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    var chunk = self.unwrapInboundIn(data)
    if self.buffered == nil {
      self.buffered = chunk
    } else {
      self.buffered!.writeBuffer(&chunk)
    }
    let bytes = self.buffered!.readableBytesView
    let compared = min(bytes.count, Self.preface.count)
    let version: Version
    if !bytes.prefix(compared).elementsEqual(Self.preface.prefix(compared)) {
      version = .http1
    } else if compared == Self.preface.count {
      version = .http2
    } else {
      return
    }
    self.timer?.cancel()
    do {
      try self.configure(version, context.channel)
    } catch {
      context.fireErrorCaught(error)
      context.close(promise: nil)
      return
    }
    let read = self.buffered!
    self.buffered = nil
    context.fireChannelRead(self.wrapInboundOut(read))
    context.fireChannelReadComplete()
    context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
  }
}
