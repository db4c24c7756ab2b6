/// Keeps a streaming handler from running ahead of the transport that sends its messages.
///
/// A grpc-swift response writer takes a message at once while the stream reports itself
/// writable, and hands it to the connection's event loop to be written later. The stream only
/// reports itself full after that loop has run the writes, so a producer that is faster than
/// the loop (a picture read from the page cache is) queues messages on the loop without bound.
/// (A large `GetPicture` to a client with a small window raised the server's RSS by tens of
/// MB, `PictureMemoryTests`.) A handler that awaits `drained()` after each message holds
/// at most one message in flight, and the stream's own writability does the rest.
public protocol ResponsePacing: Sendable {
  /// Returns once the transport has taken every message written before the call.
  func drained() async
}

/// No pacing: for transports that take each message before `write` returns (in-process).
public struct UnpacedResponses: ResponsePacing {
  public init() {}
  public func drained() async {}
}
