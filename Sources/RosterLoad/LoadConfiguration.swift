public import GRPCCore
public import GRPCNIOTransportHTTP2

/// Everything one load run needs: where to connect, what to send, how, and for how long.
///
/// ```swift
/// var configuration = LoadConfiguration(target: .ipv4(address: "127.0.0.1", port: 50051))
/// configuration.mix = try Mix(parsing: "get=60,list=40")
/// configuration.model = .open(rate: 2_000, maxInFlight: 10_000)
/// let result = try await LoadRunner(configuration: configuration).run()
/// print(result.report.text)
/// ```
public struct LoadConfiguration: Sendable {
  /// The server.
  public var target: ResolvableTargets.IPv4
  /// Plaintext or TLS.
  public var transportSecurity: HTTP2ClientTransport.Posix.TransportSecurity = .plaintext
  /// Client interceptors, such as the bearer token.
  public var interceptors: [any ClientInterceptor] = []
  /// Metadata sent with every request, such as the author of writes.
  public var metadata: Metadata = [:]
  /// Per-call options, such as the deadline.
  public var callOptions: CallOptions = .defaults
  /// HTTP/2 connections to open; requests are spread over them evenly.
  public var connections = 1
  /// Closed or open loop.
  public var model = LoadModel.closed(concurrency: 16)
  /// The measured part of the run.
  public var length = RunLength.duration(.seconds(10))
  /// Load sent before measuring starts, and not counted.
  public var warmup = Duration.seconds(1)
  /// The scenarios and their weights.
  public var mix = Mix(.get)
  /// Rows per `list`, `search` and `stream` page.
  public var pageSize = 50
  /// The Employee fields asked for by reads; empty asks for all of them.
  public var readMask: [String] = []
  /// Pages a `stream` request reads before it stops.
  public var streamPages = 10
  /// At most this many employees are kept from discovery (a uniform sample of the directory).
  public var discoverLimit = 10_000
  /// Sends unary calls over the lean HTTP/2 path (`UnaryConnection`, plaintext only) instead of
  /// grpc-swift's client, so that the client's own CPU stays small beside the server's.
  public var leanUnary = true
  /// Seeds the random choices, so a run can be repeated.
  public var seed: UInt64 = 1

  /// A configuration for `target` with the defaults above.
  public init(target: ResolvableTargets.IPv4) {
    self.target = target
  }

  /// The target as `HOST:PORT`.
  var targetDescription: String {
    self.target.addresses.map { "\($0.host):\($0.port)" }.joined(separator: ",")
  }

  /// The model in words, for reports.
  var modelDescription: String {
    switch self.model {
    case .closed(let concurrency):
      return "closed loop, \(concurrency) in flight"
    case .open(let rate, _):
      return "open loop, \(Self.format(rate))/s"
    }
  }

  private static func format(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(value)
  }
}
