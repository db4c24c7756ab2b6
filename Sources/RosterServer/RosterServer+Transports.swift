internal import GRPCCore
internal import NIOCore
internal import NIOPosix
internal import NIOSSL
internal import RosterProtocols
internal import RosterServices
internal import RosterTransport

/// The gRPC server on Roster's transport, as `RosterServer` runs it.
struct GRPCServing: Sendable {
  let serve: @Sendable () async throws -> Void
  let beginGracefulShutdown: @Sendable () -> Void
  /// `HOST:PORT`, once listening.
  let listeningAddress: @Sendable () async throws -> String

  /// A server on `transport`, its address read by `address`; `bridged`, the servers of the
  /// Connect protocol's and gRPC-Web's streamed calls (`CallBridge`), run beside it, started
  /// and stopped with it.
  init<Transport: ServerTransport>(
    _ server: GRPCServer<Transport>,
    bridged: [GRPCServer<CallBridge>] = [],
    address: @escaping @Sendable () async throws -> String
  ) {
    self.serve = {
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await server.serve() }
        for bridge in bridged {
          group.addTask { try await bridge.serve() }
        }
        try await group.waitForAll()
      }
    }
    self.beginGracefulShutdown = {
      server.beginGracefulShutdown()
      for bridge in bridged { bridge.beginGracefulShutdown() }
    }
    self.listeningAddress = address
  }
}

/// The gRPC server for `config`: the services and interceptors on Roster's HTTP/2 transport,
/// plain unary calls answered at the connection (`ConnectionFastCalls`).
func makeServing(
  config: ServerConfig,
  services: [any RegistrableRPCService],
  chain: CallChain,
  fastMethods: [UnaryFastPath.Method],
  streamingMethods: [StreamingMethod],
  eventLoops: MultiThreadedEventLoopGroup,
  loopExecutor: EventLoopGroupExecutor
) throws -> GRPCServing {
  let limits = config.limits
  // The unary methods' table serves plain gRPC calls at the connection, and the Connect
  // protocol.
  let unaryMethods = UnaryFastPath(
    methods: fastMethods,
    chain: chain,
    maxRequestBytes: limits.maxRequestBytes
  )
  let host = config.host == "localhost" ? "127.0.0.1" : config.host
  let serverInterceptors: [any ServerInterceptor] = [CooperativePoolInterceptor(), chain]
  let executor = loopExecutor
  let connect = ConnectUnary(
    fastPath: unaryMethods,
    cors: config.cors,
    console: config.console ? .embedded : nil
  )
  let streams = ConnectStreams(
    methods: streamingMethods,
    maxRequestBytes: limits.maxRequestBytes,
    cors: config.cors,
    unaryPaths: Set(unaryMethods.methods.keys)
  )
  let bridged = streams.servers(interceptors: serverInterceptors)
  let transport = RosterHTTP2Transport(
    config: RosterHTTP2Transport.Config(
      host: host,
      port: config.port,
      tls: try config.tls.map(sslContext),
      maxRequestBytes: limits.maxRequestBytes,
      maxConcurrentStreams: limits.maxConcurrentStreams,
      connection: ConnectionLimits(
        maxIdleTime: limits.maxConnectionIdle.map { TimeAmount($0) },
        maxAge: limits.maxConnectionAge.map { TimeAmount($0) },
        maxGraceTime: limits.maxConnectionGrace.map { TimeAmount($0) },
        keepaliveTime: TimeAmount(limits.keepaliveInterval),
        keepaliveTimeout: TimeAmount(limits.keepaliveTimeout),
        allowKeepaliveWithoutCalls: false,
        minPingIntervalWithoutCalls: .minutes(5)
      )
    ),
    group: eventLoops,
    connectionHandlers: { @Sendable _ in
      [
        ConnectionFastCalls(
          fastPath: unaryMethods,
          connect: connect,
          streams: streams,
          executor: executor
        )
      ]
    },
    http1Handlers: { @Sendable _ in
      [ConnectHTTP1Handler(connect: connect, streams: streams, executor: executor)]
    }
  )
  let server = GRPCServer(
    transport: transport,
    services: services,
    interceptors: serverInterceptors
  )
  return GRPCServing(server, bridged: bridged) {
    let address = try await transport.listeningAddress
    guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
    return address.protocol == .inet6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
  }
}

/// The TLS context for `files`: ALPN offers `grpc-exp`, `h2` and `http/1.1` (the Connect
/// protocol's browsers and scripts); with a client CA, clients
/// must present a certificate it signed.
func sslContext(_ files: TLSFiles) throws -> NIOSSLContext {
  let chain = try NIOSSLCertificate.fromPEMFile(files.certificatePath).map {
    NIOSSLCertificateSource.certificate($0)
  }
  let key = try NIOSSLPrivateKey(file: files.keyPath, format: .pem)
  var configuration = TLSConfiguration.makeServerConfiguration(
    certificateChain: chain,
    privateKey: .privateKey(key)
  )
  configuration.applicationProtocols = ["grpc-exp", "h2", "http/1.1"]
  if let clientCA = files.clientCAPath {
    configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(clientCA))
    configuration.certificateVerification = .noHostnameVerification
  }
  return try NIOSSLContext(configuration: configuration)
}
