package import NIOCore
internal import RosterLocks

/// The HTTP/2 connections a server has open, by peer (`describePeer`, as each call's
/// `ServerContext.remotePeer` names it), so that a per-caller limit can stop reading from the
/// connection of a caller that keeps sending past it: its requests then wait in its own socket
/// buffer, and cost the server nothing until the pause ends, rather than a refusal each.
///
/// ```swift
/// let pauses = ConnectionReadPauses()
/// // RosterHTTP2Transport.Config(..., readPauses: pauses); then, on a refusal:
/// pauses.pause(peer: context.remotePeer, for: .milliseconds(500))
/// ```
package final class ConnectionReadPauses: Sendable {
  private let byPeer = Locked<[String: ReadPauseHandler.Handle]>([:])

  package init() {}

  /// Stops reading from `peer`'s connection for `duration` (longer, if it is paused longer
  /// already); a peer with no open connection is ignored.
  package func pause(peer: String, for duration: Duration) {
    guard let handle = self.byPeer.withLock({ $0[peer] }) else { return }
    handle.pause(for: TimeAmount(duration))
  }

  /// How many connections are known: for tests, which check that closed ones are forgotten.
  package var count: Int { self.byPeer.withLock { $0.count } }

  /// Adds the pausing handler at the front of a new connection's pipeline and keeps it until
  /// the connection closes.
  func attach(to channel: any Channel, peer: String) throws {
    let handler = ReadPauseHandler()
    try channel.pipeline.syncOperations.addHandler(handler, position: .first)
    let handle = ReadPauseHandler.Handle(
      handler: NIOLoopBound(handler, eventLoop: channel.eventLoop)
    )
    self.byPeer.withLock { $0[peer] = handle }
    channel.closeFuture.whenComplete { _ in
      self.byPeer.withLock { if $0[peer] === handle { $0[peer] = nil } }
    }
  }
}

/// Holds back a connection's reads while it is paused: a read asked for meanwhile is made when
/// the pause ends (as NIO's `BackPressureHandler` holds them while the writer is busy).
final class ReadPauseHandler: ChannelDuplexHandler, RemovableChannelHandler {
  typealias InboundIn = ByteBuffer
  typealias InboundOut = ByteBuffer
  typealias OutboundIn = ByteBuffer
  typealias OutboundOut = ByteBuffer

  private var context: ChannelHandlerContext?
  private var until: NIODeadline?
  private var readPending = false
  private var resume: Scheduled<Void>?

  /// The handler, from any thread.
  final class Handle: Sendable {
    let handler: NIOLoopBound<ReadPauseHandler>

    init(handler: NIOLoopBound<ReadPauseHandler>) {
      self.handler = handler
    }

    func pause(for duration: TimeAmount) {
      let handler = self.handler
      let loop = handler.eventLoop
      loop.execute { handler.value.pause(until: loop.now + duration) }
    }
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    self.resume?.cancel()
    self.context = nil
  }

  func read(context: ChannelHandlerContext) {
    guard let until = self.until, until > context.eventLoop.now else {
      context.read()
      return
    }
    self.readPending = true
    self.scheduleResume(at: until)
  }

  private func pause(until deadline: NIODeadline) {
    guard deadline > (self.until ?? .distantPast) else { return }
    self.until = deadline
    if self.readPending { self.scheduleResume(at: deadline) }
  }

  private func scheduleResume(at deadline: NIODeadline) {
    guard let context = self.context else { return }
    self.resume?.cancel()
    let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
    self.resume = context.eventLoop.scheduleTask(deadline: deadline) {
      loopBound.value.resumeReading()
    }
  }

  private func resumeReading() {
    self.resume = nil
    self.until = nil
    guard self.readPending, let context = self.context else { return }
    self.readPending = false
    context.read()
  }
}
