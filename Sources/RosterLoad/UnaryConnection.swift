internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import NIOHTTP2
internal import NIOPosix
internal import RosterLocks

/// A lean gRPC client for unary calls: one HTTP/2 connection whose streams are frames on the
/// connection's own handler, with no channel, task or state machine per call.
///
/// `roster load` sends its unary scenarios this way over plaintext. grpc-swift's client made
/// each call cost many times h2load's client CPU, and on a machine the client shares with the server that CPU comes out of the server's share (see
/// `scripts/bench-load-accuracy`). Streaming scenarios and TLS use grpc-swift.
///
/// ```swift
/// let connection = try await UnaryConnection.connect(host: "127.0.0.1", port: 50051, metadata: [], on: loop)
/// let reply = try await connection.call(path: "/roster.v1.Directory/GetEmployee", message: bytes)
/// ```
final class UnaryConnection: Sendable {
  /// One HTTP/2 connection and its handler.
  private struct Link: Sendable {
    let channel: any Channel
    let handler: UnaryCallHandler
  }

  private struct State {
    var link: Link
    /// The connection being opened to replace one the server is closing.
    var replacing: Task<Link, any Error>?
  }

  private let host: String
  private let port: Int
  private let metadata: [(String, String)]
  private let eventLoop: any EventLoop
  private let state: Locked<State>

  private init(
    host: String,
    port: Int,
    metadata: [(String, String)],
    eventLoop: any EventLoop,
    link: Link
  ) {
    self.host = host
    self.port = port
    self.metadata = metadata
    self.eventLoop = eventLoop
    self.state = Locked(State(link: link))
  }

  /// Connects to `host:port` over plaintext HTTP/2 on `eventLoop`.
  ///
  /// When the server closes the connection (GOAWAY, as servers do after a number of requests
  /// or an age, or when they stop), the next call opens a new one, and calls the server did
  /// not take (streams past the GOAWAY's last stream id) are sent again on it, as HTTP/2
  /// allows: nothing else is retried.
  ///
  /// - Parameter metadata: headers sent with every call, such as the bearer token.
  static func connect(
    host: String,
    port: Int,
    metadata: [(String, String)],
    on eventLoop: any EventLoop
  ) async throws -> UnaryConnection {
    let link = try await Self.open(host: host, port: port, metadata: metadata, on: eventLoop)
    return UnaryConnection(
      host: host,
      port: port,
      metadata: metadata,
      eventLoop: eventLoop,
      link: link
    )
  }

  private static func open(
    host: String,
    port: Int,
    metadata: [(String, String)],
    on eventLoop: any EventLoop
  ) async throws -> Link {
    let handler = UnaryCallHandler(authority: "\(host):\(port)", metadata: metadata)
    let channel = try await ClientBootstrap(group: eventLoop)
      .channelOption(.socketOption(.tcp_nodelay), value: 1)
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          let settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 1_000),
            HTTP2Setting(parameter: .initialWindowSize, value: UnaryCallHandler.window),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 16),
          ]
          // The server's headers are checked by what reads them; validating each block again
          // costs CPU that a load generator takes from the server it measures.
          let http2 = NIOHTTP2Handler(
            mode: .client,
            initialSettings: settings,
            headerBlockValidation: .disabled,
            contentLengthValidation: .disabled
          )
          try channel.pipeline.syncOperations.addHandler(http2)
          try channel.pipeline.syncOperations.addHandler(handler)
        }
      }
      .connect(host: host, port: port)
      .get()
    return Link(channel: channel, handler: handler)
  }

  /// Sends one unary call and returns the response message's bytes.
  ///
  /// - Throws: `RPCError` with the server's status, `DEADLINE_EXCEEDED` when `timeout` passes
  ///   first, or `UNAVAILABLE` when the connection fails.
  func call(path: String, message: [UInt8], timeout: Duration? = nil) async throws -> [UInt8] {
    do {
      return try await self.send(
        path: path,
        message: message,
        timeout: timeout,
        on: try await self.link()
      )
    } catch is UnaryCallHandler.NotTaken {
      // The server never saw it: once more, on the connection that replaces this one.
      do {
        return try await self.send(
          path: path,
          message: message,
          timeout: timeout,
          on: try await self.link()
        )
      } catch is UnaryCallHandler.NotTaken {
        throw RPCError(
          code: .unavailable,
          message: "the server closed two connections before taking the call"
        )
      }
    }
  }

  private func send(
    path: String,
    message: [UInt8],
    timeout: Duration?,
    on link: Link
  ) async throws -> [UInt8] {
    let loop = link.channel.eventLoop
    let promise = loop.makePromise(of: [UInt8].self)
    let handler = link.handler
    if loop.inEventLoop {
      handler.start(path: path, message: message, timeout: timeout, promise: promise)
    } else {
      loop.execute {
        handler.start(path: path, message: message, timeout: timeout, promise: promise)
      }
    }
    return try await promise.futureResult.get()
  }

  /// The connection to send on: the current one while it takes calls, else its replacement
  /// (one reconnect, however many calls ask at once).
  private func link() async throws -> Link {
    let (link, replacing) = self.state.withLock { state -> (Link?, Task<Link, any Error>?) in
      if state.link.handler.isOpen { return (state.link, nil) }
      if let replacing = state.replacing { return (nil, replacing) }
      let (host, port, metadata, loop) = (self.host, self.port, self.metadata, self.eventLoop)
      let replacing = Task {
        try await Self.open(host: host, port: port, metadata: metadata, on: loop)
      }
      state.replacing = replacing
      return (nil, replacing)
    }
    if let link { return link }
    do {
      let new = try await replacing!.value
      // The old connection finishes what the server took; then the server closes it.
      self.state.withLock { state in
        if state.replacing == replacing { (state.link, state.replacing) = (new, nil) }
      }
      return new
    } catch {
      self.state.withLock { state in if state.replacing == replacing { state.replacing = nil } }
      throw RPCError(
        code: .unavailable,
        message: "could not reconnect to \(self.host):\(self.port): \(error)"
      )
    }
  }

  /// Closes the connection; calls in flight fail with `UNAVAILABLE`.
  func close() async {
    let (link, replacing) = self.state.withLock { ($0.link, $0.replacing) }
    try? await link.channel.close()
    if let new = try? await replacing?.value { try? await new.channel.close() }
  }
}
