internal import NIOCore
package import NIOHTTP2

/// The events of an HTTP/2 connection that Roster's connection handlers act on
/// (`ConnectionManager`, the server's `ConnectionFastCalls`), told apart by comparing the
/// event's type: a failed `as?` cast of an `Any` costs a few hundred instructions, and a call
/// brings several events (the casts showed in callgrind's profile of a `GetEmployee`).
///
/// A window update, several a call, is not cast here: `ConnectionManager` ignores it, and
/// `ConnectionFastCalls` casts it itself (`NIOHTTP2WindowUpdatedEvent`).
package enum ConnectionEvent {
  case windowUpdated
  case streamCreated(NIOHTTP2StreamCreatedEvent)
  case streamClosed(StreamClosedEvent)
  case quiesce
  /// Any other event, which the handlers pass on.
  case other

  package init(_ event: Any) {
    let type = type(of: event)
    if type == NIOHTTP2WindowUpdatedEvent.self {
      self = .windowUpdated
    } else if type == NIOHTTP2StreamCreatedEvent.self {
      self = .streamCreated(event as! NIOHTTP2StreamCreatedEvent)
    } else if type == StreamClosedEvent.self {
      self = .streamClosed(event as! StreamClosedEvent)
    } else if type == ChannelShouldQuiesceEvent.self {
      self = .quiesce
    } else {
      self = .other
    }
  }
}
