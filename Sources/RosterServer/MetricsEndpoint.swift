internal import NIOCore
internal import NIOHTTP1
internal import NIOPosix
public import Prometheus
public import ServiceLifecycle

/// Serves `GET /metrics` in the Prometheus text format over plain HTTP/1.1, on a port of its
/// own (`roster serve --metrics-port`), until graceful shutdown.
///
/// ```swift
/// let registry = PrometheusCollectorRegistry()
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
/// let endpoint = MetricsEndpoint(host: "127.0.0.1", port: 9090, registry: registry)
/// ```
public struct MetricsEndpoint: Service {
  private let host: String
  private let port: Int
  private let registry: PrometheusCollectorRegistry
  /// Called with the bound port once listening.
  private let onListening: @Sendable (Int) -> Void

  public init(
    host: String,
    port: Int,
    registry: PrometheusCollectorRegistry,
    onListening: @escaping @Sendable (Int) -> Void = { _ in }
  ) {
    self.host = host
    self.port = port
    self.registry = registry
    self.onListening = onListening
  }

  public func run() async throws {
    let registry = self.registry
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      .childChannelInitializer { channel in
        channel.pipeline.configureHTTPServerPipeline(withErrorHandling: true).flatMap {
          channel.pipeline.addHandler(MetricsHandler(registry: registry))
        }
      }
      .bind(host: self.host, port: self.port)
      .get()
    self.onListening(channel.localAddress?.port ?? self.port)
    try? await gracefulShutdown()
    try await channel.close()
  }
}

/// Answers each request: the exposition for `GET /metrics`, 404 for anything else.
private final class MetricsHandler: ChannelInboundHandler, @unchecked Sendable {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  private let registry: PrometheusCollectorRegistry
  private var head: HTTPRequestHead?

  init(registry: PrometheusCollectorRegistry) {
    self.registry = registry
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch self.unwrapInboundIn(data) {
    case .head(let head):
      self.head = head
    case .body:
      break
    case .end:
      guard let head = self.head else { return }
      let found = head.method == .GET && head.uri.split(separator: "?").first == "/metrics"
      let body = found ? self.registry.emitToBuffer() : Array("not found: GET /metrics\n".utf8)
      var headers = HTTPHeaders()
      headers.add(name: "content-type", value: found ? "text/plain; version=0.0.4" : "text/plain")
      headers.add(name: "content-length", value: String(body.count))
      let response = HTTPResponseHead(
        version: head.version,
        status: found ? .ok : .notFound,
        headers: headers
      )
      context.write(self.wrapOutboundOut(.head(response)), promise: nil)
      context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
      let keepAlive = head.isKeepAlive
      context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in
        if !keepAlive { context.close(promise: nil) }
      }
      self.head = nil
    }
  }
}
