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
  /// The server has stopped: `listeningAddress` fails if it never listened.
  let stopped: @Sendable () -> Void

  /// A server on `transport`, its address read by `address`.
  init<Transport: ServerTransport>(
    _ server: GRPCServer<Transport>,
    address: @escaping @Sendable () async throws -> String,
    stopped: @escaping @Sendable () -> Void
  ) {
    self.serve = { try await server.serve() }
    self.beginGracefulShutdown = { server.beginGracefulShutdown() }
    self.listeningAddress = address
    self.stopped = stopped
  }
}

/// The gRPC server for `config`: the services and interceptors on Roster's HTTP/2 transport,
/// plain unary calls answered at the connection (`ConnectionFastCalls`), and every streamed
/// call, whatever its protocol, through one router: the services' registrations, with each
/// streaming method registered again in the form that serves every protocol (`StreamingMethod`).
func makeServing(
  config: ServerConfig,
  services: [any RegistrableRPCService],
  chain: CallChain,
  fastMethods: [UnaryFastPath.Method],
  streamingMethods: [StreamingMethod],
  eventLoops: MultiThreadedEventLoopGroup,
  loopExecutor: EventLoopGroupExecutor,
  readPauses: ConnectionReadPauses? = nil
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
    console: config.console ? webConsole(config.signIn) : nil
  )
  let bridge = CallBridge()
  let streams = ConnectStreams(
    methods: streamingMethods,
    bridge: bridge,
    maxRequestBytes: limits.maxRequestBytes,
    cors: config.cors,
    unaryPaths: Set(unaryMethods.methods.keys)
  )
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
      ),
      readPauses: readPauses
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
  var router = RPCRouter<ServerTransports<RosterHTTP2Transport>>()
  for service in services { service.registerMethods(with: &router) }
  // Each streaming method's handler, in place of the one its service registered: the same
  // handler, with the codec that reads and writes the form its call's `CallWire` names.
  for method in streamingMethods { method.register(on: &router) }
  router.registerInterceptors(pipeline: serverInterceptors.map { .apply($0, to: .all) })
  let server = GRPCServer(transport: ServerTransports(transport, bridge), router: router)
  return GRPCServing(
    server,
    address: {
      let address = try await transport.listeningAddress
      guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
      return address.protocol == .inet6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    },
    stopped: { transport.notListening() }
  )
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

extension ConnectionReadPauses: CallerPausing {}

/// The web console, signing people in through the provider when `signIn` names its client.
private func webConsole(_ signIn: SignIn?) -> WebConsole {
  guard let signIn, let clientID = signIn.consoleClientID else { return .embedded }
  return WebConsole.embedded.signingIn(
    issuer: signIn.verifier.settings.issuer,
    clientID: clientID,
    scope: signIn.consoleScope
  )
}
