package import GRPCCore
package import NIOCore
internal import NIOExtras
internal import NIOHPACK
internal import NIOHTTP1
internal import NIOHTTP2
internal import NIOPosix
package import NIOSSL
internal import RosterLocks

/// Roster's own gRPC server transport on swift-nio-http2 (`roster serve --transport roster`).
///
/// grpc-swift's transport gives every HTTP/2 stream a child channel, its stream handler, an
/// `NIOAsyncChannel` and a task before the stream's first frame names its method; for a call as
/// small as `GetEmployee` that is most of the server's work (docs/performance.md, "Against
/// grpc-go"). Here each connection runs, in order:
///
/// 1. `NIOHTTP2Handler` (frames, HPACK, flow control, the connection's settings);
/// 2. `ConnectionManager` (idle and age limits, keepalive, ping policing, GOAWAY on shutdown);
/// 3. the handlers `connectionHandlers` makes for the connection: in RosterServer,
///    `ConnectionFastCalls`, which answers the unary fast path's calls right there, with no
///    stream of their own;
/// 4. `HTTP2StreamMultiplexer`, which gives every other stream a child channel with a
///    `GRPCStreamCodec`, bridged to `GRPCServer` as an `RPCStream`.
///
/// ```swift
/// let transport = RosterHTTP2Transport(config: config, group: group) { channel in [FastCalls()] }
/// let server = GRPCServer(transport: transport, services: services)
/// ```
package final class RosterHTTP2Transport: ServerTransport {
  package typealias Bytes = BufferBytes

  package struct Config: Sendable {
    package var host: String
    package var port: Int
    /// TLS, when set: ALPN must offer `h2` (and may offer `grpc-exp`).
    package var tls: NIOSSLContext?
    package var maxRequestBytes: Int
    package var maxConcurrentStreams: Int
    package var connection: ConnectionLimits
    /// Where each HTTP/2 connection is registered so that its reads can be paused (per-caller
    /// limits); nil for none.
    package var readPauses: ConnectionReadPauses?

    package init(
      host: String,
      port: Int,
      tls: NIOSSLContext?,
      maxRequestBytes: Int,
      maxConcurrentStreams: Int,
      connection: ConnectionLimits,
      readPauses: ConnectionReadPauses? = nil
    ) {
      self.host = host
      self.port = port
      self.tls = tls
      self.maxRequestBytes = maxRequestBytes
      self.maxConcurrentStreams = maxConcurrentStreams
      self.connection = connection
      self.readPauses = readPauses
    }
  }

  /// Makes the handlers that go between `ConnectionManager` and the stream multiplexer in a
  /// new connection's pipeline; called on the connection's event loop.
  package typealias ConnectionHandlers = @Sendable (any Channel) throws -> [any ChannelHandler]

  private let config: Config
  private let connectionHandlers: ConnectionHandlers?
  private let group: any EventLoopGroup
  private let quiescing: ServerQuiescingHelper
  private let address: EventLoopPromise<SocketAddress>
  private let descriptorsByPath = Locked<[String: MethodDescriptor]>([:])

  /// Makes the handlers that serve an HTTP/1.1 connection, after NIO's HTTP/1.1 server
  /// pipeline (request decoding, response encoding, pipelining, protocol errors); called on the
  /// connection's event loop.
  package typealias HTTP1Handlers = @Sendable (any Channel) throws -> [any ChannelHandler]

  private let http1Handlers: HTTP1Handlers?

  /// `http1Handlers`, when given, serve the connections that open with an HTTP/1.1 request
  /// rather than HTTP/2's preface, on the same port (`HTTPVersionDetector`).
  package init(
    config: Config,
    group: any EventLoopGroup,
    connectionHandlers: ConnectionHandlers? = nil,
    http1Handlers: HTTP1Handlers? = nil
  ) {
    self.config = config
    self.connectionHandlers = connectionHandlers
    self.http1Handlers = http1Handlers
    self.group = group
    self.quiescing = ServerQuiescingHelper(group: group)
    self.address = group.any().makePromise()
  }

  deinit {
    self.address.fail(ChannelError.ioOnClosedChannel)
  }

  /// The bound address, once the transport listens.
  package var listeningAddress: SocketAddress {
    get async throws { try await self.address.futureResult.get() }
  }

  /// Fails `listeningAddress` for whoever waits for it, unless the transport has listened:
  /// for a server that stopped before it began (a SIGTERM while it started), which would
  /// otherwise leave them waiting for good.
  package func notListening() {
    self.address.fail(ChannelError.ioOnClosedChannel)
  }

  package func configure(context: GRPCServerContext) {
    let byPath = Dictionary(
      context.methods.map { ("/" + $0.fullyQualifiedMethod, $0) },
      uniquingKeysWith: { a, _ in a }
    )
    self.descriptorsByPath.withLock { $0 = byPath }
  }

  package func beginGracefulShutdown() {
    self.quiescing.initiateShutdown(promise: nil)
  }

  package func listen(
    streamHandler: @escaping @Sendable (RPCStream<Inbound, Outbound>, ServerContext) async -> Void
  ) async throws {
    let tls = self.config.tls
    let (streams, accepted) = AsyncStream.makeStream(of: AcceptedStream.self)
    let descriptorsByPath = self.descriptorsByPath.withLock { $0 }
    let bootstrap = ServerBootstrap(group: self.group)
      .serverChannelOption(.backlog, value: 256)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .serverChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHandler(
            self.quiescing.makeServerChannelHandler(channel: channel)
          )
        }
      }
      .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try self.configure(
            connection: channel,
            tls: tls,
            descriptorsByPath: descriptorsByPath,
            accepted: accepted
          )
        }
      }
    let server: any Channel
    do {
      server = try await bootstrap.bind(host: self.config.host, port: self.config.port).get()
    } catch {
      self.address.fail(error)
      throw error
    }
    self.address.succeed(server.localAddress!)
    // Shutdown closes the listener first, then asks every connection to go; once they have all
    // closed, no stream can come, and `listen` returns when the last call has ended.
    let allClosed = server.eventLoop.makePromise(of: Void.self)
    allClosed.futureResult.whenComplete { _ in accepted.finish() }
    server.closeFuture.whenComplete { _ in
      self.quiescing.initiateShutdown(promise: allClosed)
    }
    await withTaskCancellationHandler {
      await withDiscardingTaskGroup { group in
        for await stream in streams {
          group.addTask { await Self.serve(stream, handler: streamHandler) }
        }
      }
    } onCancel: {
      server.close(promise: nil)
    }
    try? await server.close()
  }

  /// One connection's pipeline (see the type's documentation).
  private func configure(
    connection channel: any Channel,
    tls: NIOSSLContext?,
    descriptorsByPath: [String: MethodDescriptor],
    accepted: AsyncStream<AcceptedStream>.Continuation
  ) throws {
    let sync = channel.pipeline.syncOperations
    try sync.addHandler(TickFlushHandler())
    if let tls { try sync.addHandler(NIOSSLServerHandler(context: tls)) }
    guard let http1Handlers = self.http1Handlers else {
      try self.configureHTTP2(
        connection: channel,
        descriptorsByPath: descriptorsByPath,
        accepted: accepted
      )
      return
    }
    let detector = HTTPVersionDetector(timeout: Self.versionTimeout) { version, channel in
      switch version {
      case .http2:
        try self.configureHTTP2(
          connection: channel,
          descriptorsByPath: descriptorsByPath,
          accepted: accepted
        )
      case .http1:
        let sync = channel.pipeline.syncOperations
        let clocks = HTTP1IdleHandler(maxIdleTime: self.config.connection.maxIdleTime)
        // Before the decoder, which the server pipeline adds after it.
        try sync.addHandler(clocks.byteWatcher())
        try sync.configureHTTPServerPipeline(
          withPipeliningAssistance: true,
          withErrorHandling: true
        )
        try sync.addHandler(clocks)
        try sync.addHandlers(try http1Handlers(channel))
      }
    }
    try sync.addHandler(detector)
  }

  /// The largest header block a client may send (decoded; HPACK's reckoning): past it, the
  /// connection ends with an error, the HPACK state being the connection's. Above the
  /// identity provider's token bound, so that an oversized bearer token is refused as a call
  /// (`UNAUTHENTICATED`) rather than as the connection of every call beside it.
  static let maxHeaderListSize = 128 * 1024

  /// How long a new connection may send nothing before it is closed, its HTTP version untold.
  static let versionTimeout = TimeAmount.seconds(30)

  private func configureHTTP2(
    connection channel: any Channel,
    descriptorsByPath: [String: MethodDescriptor],
    accepted: AsyncStream<AcceptedStream>.Continuation
  ) throws {
    let sync = channel.pipeline.syncOperations
    var settings: HTTP2Settings = [
      HTTP2Setting(parameter: .maxFrameSize, value: 1 << 14),
      HTTP2Setting(parameter: .initialWindowSize, value: 65535),
      HTTP2Setting(parameter: .maxHeaderListSize, value: Self.maxHeaderListSize),
    ]
    settings.append(
      HTTP2Setting(parameter: .maxConcurrentStreams, value: self.config.maxConcurrentStreams)
    )
    // The client's header blocks are checked by `ConnectionManager` (`RequestHeaderCheck`);
    // swift-nio-http2's own check also ran on the server's blocks, at twice the cost.
    var connection = NIOHTTP2Handler.ConnectionConfiguration()
    connection.initialSettings = settings
    connection.headerBlockValidation = .disabled
    // The manager hears of every frame the handler writes: a GOAWAY for a connection error
    // has it close the connection.
    let manager = ConnectionManager(limits: self.config.connection)
    try sync.addHandler(
      NIOHTTP2Handler(mode: .server, frameDelegate: manager, connectionConfiguration: connection)
    )
    try sync.addHandler(manager)
    if let connectionHandlers = self.connectionHandlers {
      try sync.addHandlers(try connectionHandlers(channel))
    }
    let maxRequestBytes = self.config.maxRequestBytes
    let remotePeer = describePeer(channel.remoteAddress)
    try self.config.readPauses?.attach(to: channel, peer: remotePeer)
    let localPeer = describePeer(channel.localAddress)
    let multiplexer = HTTP2StreamMultiplexer(
      mode: .server,
      channel: channel,
      targetWindowSize: 65535
    ) { stream in
      stream.eventLoop.makeCompletedFuture {
        let descriptor = stream.eventLoop.makePromise(of: MethodDescriptor.self)
        let codec = GRPCStreamCodec(
          maxPayloadSize: maxRequestBytes,
          descriptorsByPath: descriptorsByPath,
          descriptor: descriptor
        )
        try stream.pipeline.syncOperations.addHandler(codec)
        let wrapped = try NIOAsyncChannel<
          RPCRequestPart<BufferBytes>, RPCResponsePart<BufferBytes>
        >(
          wrappingChannelSynchronously: stream
        )
        accepted.yield(
          AcceptedStream(
            channel: wrapped,
            codec: NIOLoopBound(codec, eventLoop: stream.eventLoop),
            descriptor: descriptor.futureResult,
            remotePeer: remotePeer,
            localPeer: localPeer,
            arrived: .now
          )
        )
      }
    }
    try sync.addHandler(multiplexer)
  }

  /// A stream the multiplexer opened, waiting for its call to run.
  struct AcceptedStream: Sendable {
    let channel: NIOAsyncChannel<RPCRequestPart<BufferBytes>, RPCResponsePart<BufferBytes>>
    let codec: NIOLoopBound<GRPCStreamCodec>
    let descriptor: EventLoopFuture<MethodDescriptor>
    let remotePeer: String
    let localPeer: String
    let arrived: ContinuousClock.Instant
  }

  /// When a call's stream opened, as its `ServerContext.transportSpecific`: before grpc-swift's
  /// executor started the timer for its `grpc-timeout`, so a deadline counted from it never
  /// passes after that timer fires.
  public struct Arrival: ServerContext.TransportSpecific {
    public let arrived: ContinuousClock.Instant

    public init(arrived: ContinuousClock.Instant) {
      self.arrived = arrived
    }
  }

  /// Runs one stream's call through `GRPCServer` (`handler`), as grpc-swift's transport does.
  private static func serve(
    _ stream: AcceptedStream,
    handler: @escaping @Sendable (RPCStream<Inbound, Outbound>, ServerContext) async -> Void
  ) async {
    try? await stream.channel.executeThenClose { inbound, outbound in
      guard let descriptor = try? await stream.descriptor.get() else { return }
      await withServerContextRPCCancellationHandle { handle in
        let codec = stream.codec
        stream.channel.channel.eventLoop.execute { codec.value.setCancellation(handle) }
        let rpc = RPCStream(
          descriptor: descriptor,
          inbound: RPCAsyncSequence(wrapping: inbound),
          outbound: RPCWriter.Closable(
            wrapping: StreamOutbound(writer: outbound, channel: stream.channel.channel)
          )
        )
        var context = ServerContext(
          descriptor: descriptor,
          remotePeer: stream.remotePeer,
          localPeer: stream.localPeer,
          cancellation: handle
        )
        context.transportSpecific = Arrival(arrived: stream.arrived)
        await handler(rpc, context)
      }
      // Wait for the status to reach the stream before `executeThenClose` closes it.
      if !Task.isCancelled {
        try await stream.channel.channel.closeFuture.get()
      }
    }
  }
}

/// A stream's response side as `GRPCServer` writes it: parts to the stream's writer; an error
/// fails the stream, as grpc-swift's transport does.
private struct StreamOutbound: ClosableRPCWriterProtocol {
  typealias Element = RPCResponsePart<BufferBytes>
  let writer: NIOAsyncChannelOutboundWriter<RPCResponsePart<BufferBytes>>
  let channel: any Channel

  func write(_ element: Element) async throws {
    try await self.writer.write(element)
  }

  func write(contentsOf elements: some Sequence<Element>) async throws {
    try await self.writer.write(contentsOf: elements)
  }

  func finish() {
    self.writer.finish()
  }

  func finish(throwing error: any Error) {
    self.channel.pipeline.fireErrorCaught(error)
  }
}
