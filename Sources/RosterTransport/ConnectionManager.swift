package import NIOCore
internal import NIOHTTP2

/// The life of one HTTP/2 connection on Roster's own transport, as grpc-swift's server
/// manages it on its own: an idle connection is closed after `maxIdleTime`; one older than
/// `maxAge` is asked to go (GOAWAY) and closed after `maxGraceTime`; the server shutting down
/// (`ChannelShouldQuiesceEvent`) does the same; a connection that has been quiet for
/// `keepaliveTime` is pinged, and closed when the ack does not come within `keepaliveTimeout`;
/// a client that pings more often than it may (gRFC A8: every `minPingIntervalWithoutCalls`
/// with calls open, or when `allowKeepaliveWithoutCalls`; else every two hours) is told
/// `ENHANCE_YOUR_CALM` after two strikes, and the connection closes. Each HEADERS or DATA frame
/// the server sends clears the strikes, as grpc-swift's does (`wroteFrame`).
///
/// After a connection error (RFC 9113 § 5.4.1: a broken frame, a frame on a closed stream, a
/// flood) the connection closes: `NIOHTTP2Handler` writes its GOAWAY and then reports the
/// error, and this handler, the handler's `NIOHTTP2FrameDelegate`, has seen that GOAWAY go
/// out, so it flushes and closes, and reads nothing more. The error's type alone cannot tell:
/// the same error (`StreamClosed`) is a stream error in one state and a connection error in
/// another.
///
/// When the last stream ends after GOAWAY, the connection closes only once everything written
/// before (that stream's trailers) has reached the socket: a second GOAWAY is written behind
/// them, and the close follows its write.
///
/// It also refuses a malformed header block from the client (`RequestHeaderCheck`, in place of
/// swift-nio-http2's check, which is off): that stream is reset with `PROTOCOL_ERROR`, as
/// swift-nio-http2 resets it, and no handler after this one hears of it (neither the frame nor,
/// for a new stream, its creation and its end).
///
/// Sits right after `NIOHTTP2Handler`, which acks pings itself. On the connection's event
/// loop only.
final class ConnectionManager: ChannelInboundHandler, NIOHTTP2FrameDelegate {
  typealias InboundIn = HTTP2Frame
  typealias InboundOut = HTTP2Frame

  typealias Limits = ConnectionLimits

  private let limits: Limits
  private var context: ChannelHandlerContext?
  /// The streams open now (a set, not a count: a stream refused at once closes without
  /// having been created).
  private var openStreams: Set<HTTP2StreamID> = []
  /// The highest stream whose request headers were read: a HEADERS frame above it opens a
  /// stream (a request block), one at or below it ends one (trailers); and GOAWAY's last stream.
  private var lastStreamID = HTTP2StreamID(0)
  /// New streams reset for a malformed request block, until they close: their events stay here.
  private var refusedStreams: Set<HTTP2StreamID> = []
  /// GOAWAY has been sent: the connection closes once its streams are done.
  private var closing = false
  /// `NIOHTTP2Handler` has written a GOAWAY with an error code: a connection error, which
  /// ends the connection.
  private var connectionErrorSent = false
  private var readSinceKeepalive = false
  private var pingStrikes = 0
  private var lastValidPing: NIODeadline?
  /// When the last stream closed (or the connection opened); nil while streams are open.
  private var idleSince: NIODeadline?
  /// One idle timer for the connection's life (`idleCheck`), not one per quiet spell.
  private var idleTimer: Scheduled<Void>?
  private var ageTimer: Scheduled<Void>?
  private var graceTimer: Scheduled<Void>?
  private var keepaliveTimer: Scheduled<Void>?
  private var keepaliveTimeoutTimer: Scheduled<Void>?

  /// The payload of the server's keepalive pings, to know their acks.
  static let keepalivePing = HTTP2PingData(withInteger: 0x526F_7374_6572_4B41)

  init(limits: Limits) {
    self.limits = limits
  }

  func handlerAdded(context: ChannelHandlerContext) {
    self.context = context
    if context.channel.isActive { self.start(context: context) }
  }

  func channelActive(context: ChannelHandlerContext) {
    self.start(context: context)
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

  private func start(context: ChannelHandlerContext) {
    guard self.ageTimer == nil, self.keepaliveTimer == nil else { return }
    let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
    if let maxAge = self.limits.maxAge {
      self.ageTimer = context.eventLoop.scheduleTask(in: maxAge) { loop.value.goAway() }
    }
    if let maxIdle = self.limits.maxIdleTime {
      self.idleSince = context.eventLoop.now
      self.scheduleIdleCheck(at: context.eventLoop.now + maxIdle)
    }
    self.scheduleKeepalive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    self.readSinceKeepalive = true
    let frame = self.unwrapInboundIn(data)
    if case .headers(let headers) = frame.payload {
      let opens = frame.streamID > self.lastStreamID
      if opens { self.lastStreamID = frame.streamID }
      guard RequestHeaderCheck.isWellFormed(headers.headers, opens ? .request : .trailers) else {
        self.refuse(frame.streamID, opened: opens, context: context)
        return
      }
    } else if case .ping(let ping, let ack) = frame.payload {
      if ack {
        if ping == Self.keepalivePing {
          self.keepaliveTimeoutTimer?.cancel()
          self.keepaliveTimeoutTimer = nil
        }
      } else if self.tooManyPings(now: .now()) {
        self.pingStrikes = 0
        self.closing = true
        let goAway = HTTP2Frame(
          streamID: .rootStream,
          payload: .goAway(
            lastStreamID: self.lastStreamID,
            errorCode: .enhanceYourCalm,
            opaqueData: nil
          )
        )
        context.writeAndFlush(NIOAny(goAway), promise: nil)
        context.close(promise: nil)
        return
      }
    }
    context.fireChannelRead(data)
  }

  /// Resets a stream whose header block is malformed (RFC 9113 § 8.1.1: a stream error of type
  /// `PROTOCOL_ERROR`).
  private func refuse(_ stream: HTTP2StreamID, opened: Bool, context: ChannelHandlerContext) {
    if opened { self.refusedStreams.insert(stream) }
    let reset = HTTP2Frame(streamID: stream, payload: .rstStream(.protocolError))
    context.writeAndFlush(NIOAny(reset), promise: nil)
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    // Told apart by their types, not by a failed cast for each case (`ConnectionEvent`).
    switch ConnectionEvent(event) {
    case .windowUpdated, .other:
      ()
    case .streamCreated(let created):
      if !self.refusedStreams.isEmpty, self.refusedStreams.contains(created.streamID) { return }
      self.openStreams.insert(created.streamID)
      self.pingStrikes = 0
      self.idleSince = nil
    case .streamClosed(let closed):
      if !self.refusedStreams.isEmpty, self.refusedStreams.remove(closed.streamID) != nil { return }
      guard self.openStreams.remove(closed.streamID) != nil else { break }
      if self.openStreams.isEmpty {
        if self.closing {
          self.closeAfterWrites(context: context)
        } else {
          self.idleSince = context.eventLoop.now
        }
      }
    case .quiesce:
      self.goAway()
    }
    context.fireUserInboundEventTriggered(event)
  }

  /// gRFC A8's policing of the client's pings: whether this one is a strike too many.
  private func tooManyPings(now: NIODeadline) -> Bool {
    let interval =
      !self.openStreams.isEmpty || self.limits.allowKeepaliveWithoutCalls
      ? self.limits.minPingIntervalWithoutCalls : .hours(2)
    if let last = self.lastValidPing, last + interval > now {
      self.pingStrikes += 1
      return self.pingStrikes > 2
    }
    self.lastValidPing = now
    return false
  }

  /// Asks the client to go: GOAWAY naming the last stream the server will serve, then the
  /// close once those streams are done, or after the grace time.
  private func goAway() {
    guard !self.closing, let context = self.context else { return }
    self.closing = true
    self.idleTimer?.cancel()
    let goAway = HTTP2Frame(
      streamID: .rootStream,
      payload: .goAway(lastStreamID: self.lastStreamID, errorCode: .noError, opaqueData: nil)
    )
    if self.openStreams.isEmpty {
      self.closeAfterWrites(context: context, goAway: goAway)
      return
    }
    context.writeAndFlush(NIOAny(goAway), promise: nil)
    if let grace = self.limits.maxGraceTime {
      let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
      self.graceTimer = context.eventLoop.scheduleTask(in: grace) {
        bound.value.close(promise: nil)
      }
    }
  }

  /// Writes `goAway` (by default, one naming the last stream again: RFC 9113 allows more than
  /// one), then closes once it is written, so that nothing written before it is dropped.
  private func closeAfterWrites(context: ChannelHandlerContext, goAway: HTTP2Frame? = nil) {
    let frame =
      goAway
      ?? HTTP2Frame(
        streamID: .rootStream,
        payload: .goAway(lastStreamID: self.lastStreamID, errorCode: .noError, opaqueData: nil)
      )
    let written = context.eventLoop.makePromise(of: Void.self)
    context.writeAndFlush(NIOAny(frame), promise: written)
    let channel = context.channel
    written.futureResult.whenComplete { _ in channel.close(promise: nil) }
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    if self.connectionErrorSent || Self.endsConnection(error) {
      // The GOAWAY is written; reading on would only feed a broken or hostile peer.
      self.closing = true
      context.flush()
      context.close(promise: nil)
    }
    context.fireErrorCaught(error)
  }

  /// Every frame `NIOHTTP2Handler` writes, its own and this pipeline's, as it goes out: a
  /// GOAWAY with an error code marks a connection error, which `errorCaught` hears of next; the
  /// server's HEADERS and DATA frames forgive the client's pings so far (gRFC A8: a client's BDP
  /// pings follow the data it receives). Read here, not as a write through this handler: each
  /// frame written through a handler is unwrapped from `NIOAny` by a dynamic cast.
  func wroteFrame(_ frame: HTTP2Frame) {
    switch frame.payload {
    case .headers, .data:
      self.pingStrikes = 0
      self.lastValidPing = nil
    case .goAway(_, let code, _) where code != .noError:
      self.connectionErrorSent = true
    default:
      ()
    }
  }

  /// The errors swift-nio-http2 raises for a peer that floods or breaks the framing: each ends
  /// the connection (a GOAWAY), also when that GOAWAY could not be written.
  static func endsConnection(_ error: any Error) -> Bool {
    switch error {
    case is NIOHTTP2Errors.ExcessiveContinuationFrames,
      is NIOHTTP2Errors.ExcessivelyLargeHeaderBlock,
      is NIOHTTP2Errors.ExcessiveRSTFrames, is NIOHTTP2Errors.ExcessiveControlFrames,
      is NIOHTTP2Errors.ExcessiveEmptyDataFrames, is NIOHTTP2Errors.ExcessiveNumberOfGlitches,
      is NIOHTTP2Errors.ExcessiveStreamErrors, is NIOHTTP2Errors.ExcessiveOutboundFrameBuffering,
      is NIOHTTP2Errors.BadClientMagic, is NIOHTTP2Errors.UnableToParseFrame:
      return true
    default:
      return false
    }
  }

  /// Schedules the idle timer's next look. It fires at the earliest moment the connection could
  /// have been idle for `maxIdleTime`, and looks at when it went idle: a timer scheduled when
  /// each call ends and cancelled when the next begins cost every call its own.
  private func scheduleIdleCheck(at deadline: NIODeadline) {
    guard let context = self.context else { return }
    let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
    self.idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
      loop.value.idleCheck()
    }
  }

  /// GOAWAY for a connection that has had no stream open for `maxIdleTime`; else the next look.
  private func idleCheck() {
    guard let maxIdle = self.limits.maxIdleTime, let context = self.context, !self.closing else {
      return
    }
    let now = context.eventLoop.now
    guard let since = self.idleSince else {
      self.scheduleIdleCheck(at: now + maxIdle)
      return
    }
    if since + maxIdle <= now {
      self.goAway()
    } else {
      self.scheduleIdleCheck(at: since + maxIdle)
    }
  }

  /// Pings a connection that has read nothing for `keepaliveTime`.
  private func scheduleKeepalive() {
    guard let context = self.context else { return }
    let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
    self.keepaliveTimer = context.eventLoop.scheduleTask(in: self.limits.keepaliveTime) {
      loop.value.keepaliveDue()
    }
  }

  private func keepaliveDue() {
    guard let context = self.context else { return }
    defer { self.scheduleKeepalive() }
    guard !self.readSinceKeepalive else {
      self.readSinceKeepalive = false
      return
    }
    guard self.keepaliveTimeoutTimer == nil else { return }
    let ping = HTTP2Frame(streamID: .rootStream, payload: .ping(Self.keepalivePing, ack: false))
    context.writeAndFlush(NIOAny(ping), promise: nil)
    let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
    self.keepaliveTimeoutTimer = context.eventLoop.scheduleTask(in: self.limits.keepaliveTimeout) {
      bound.value.close(promise: nil)
    }
  }

  private func cancelTimers() {
    for timer in [
      self.idleTimer, self.ageTimer, self.graceTimer, self.keepaliveTimer,
      self.keepaliveTimeoutTimer,
    ] {
      timer?.cancel()
    }
    self.idleTimer = nil
    self.ageTimer = nil
    self.graceTimer = nil
    self.keepaliveTimer = nil
    self.keepaliveTimeoutTimer = nil
  }
}

/// What `ConnectionManager` enforces on one connection.
package struct ConnectionLimits: Sendable {
  package var maxIdleTime: TimeAmount?
  package var maxAge: TimeAmount?
  package var maxGraceTime: TimeAmount?
  package var keepaliveTime: TimeAmount
  package var keepaliveTimeout: TimeAmount
  package var allowKeepaliveWithoutCalls: Bool
  package var minPingIntervalWithoutCalls: TimeAmount

  package init(
    maxIdleTime: TimeAmount?,
    maxAge: TimeAmount?,
    maxGraceTime: TimeAmount?,
    keepaliveTime: TimeAmount,
    keepaliveTimeout: TimeAmount,
    allowKeepaliveWithoutCalls: Bool,
    minPingIntervalWithoutCalls: TimeAmount
  ) {
    self.maxIdleTime = maxIdleTime
    self.maxAge = maxAge
    self.maxGraceTime = maxGraceTime
    self.keepaliveTime = keepaliveTime
    self.keepaliveTimeout = keepaliveTimeout
    self.allowKeepaliveWithoutCalls = allowKeepaliveWithoutCalls
    self.minPingIntervalWithoutCalls = minPingIntervalWithoutCalls
  }
}
