import ArgumentParser
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterServices

/// How a client subcommand reaches the server: address, token, TLS and deadline.
struct ConnectionOptions: ParsableArguments {
  @Option(help: "Server address as HOST:PORT (env ROSTER_TARGET).")
  var target: String = ProcessInfo.processInfo.environment["ROSTER_TARGET"] ?? "127.0.0.1:50051"

  @Option(help: "API token, sent as a bearer token (env ROSTER_TOKEN).")
  var token: String? = ProcessInfo.processInfo.environment["ROSTER_TOKEN"]

  @Flag(help: "Connect with TLS, trusting the system's CAs (or --tls-ca).")
  var tls = false

  @Option(help: "PEM CA certificates to trust for the server's certificate (implies --tls).")
  var tlsCa: String?

  @Option(help: "PEM client certificate, for servers that require one (implies --tls).")
  var tlsCert: String?

  @Option(help: "PEM private key of --tls-cert.")
  var tlsKey: String?

  @Option(help: "Per-call deadline in milliseconds; 0 for none.")
  var deadlineMs: Int = 0

  func validate() throws {
    _ = try self.resolvedTarget()
    if (self.tlsCert == nil) != (self.tlsKey == nil) {
      throw ValidationError("--tls-cert and --tls-key go together")
    }
    if self.deadlineMs < 0 { throw ValidationError("--deadline-ms must not be negative") }
  }

  /// Whether the connection uses TLS.
  var usesTLS: Bool { self.tls || self.tlsCa != nil || self.tlsCert != nil }

  /// Plaintext, or TLS with the given roots and client certificate.
  var transportSecurity: HTTP2ClientTransport.Posix.TransportSecurity {
    guard self.usesTLS else { return .plaintext }
    return .tls { tls in
      if let ca = self.tlsCa { tls.trustRoots = .certificates([.file(path: ca, format: .pem)]) }
      if let certificate = self.tlsCert, let key = self.tlsKey {
        tls.certificateChain = [.file(path: certificate, format: .pem)]
        tls.privateKey = .file(path: key, format: .pem)
      }
    }
  }

  /// Call options with the `--deadline-ms` timeout.
  var callOptions: CallOptions {
    var options = CallOptions.defaults
    if self.deadlineMs > 0 { options.timeout = .milliseconds(self.deadlineMs) }
    return options
  }

  /// The parsed target.
  func resolvedTarget() throws -> ResolvableTargets.IPv4 {
    let parts = self.target.split(separator: ":")
    guard parts.count == 2, let port = Int(parts[1]), (1 ... 65535).contains(port) else {
      throw ValidationError("--target must be HOST:PORT, for example 127.0.0.1:50051")
    }
    let host = parts[0] == "localhost" ? "127.0.0.1" : String(parts[0])
    return .ipv4(address: host, port: port)
  }

  /// The bearer-token interceptor, when there is a token.
  var interceptors: [any ClientInterceptor] {
    self.token.map { [BearerTokenInterceptor(token: $0)] } ?? []
  }

  /// Runs `body` with a connected client, closing it afterwards.
  func withClient<T: Sendable>(
    _ body: (GRPCClient<HTTP2ClientTransport.Posix>) async throws -> T
  ) async throws -> T {
    try await withGRPCClient(
      transport: .http2NIOPosix(
        target: try self.resolvedTarget(),
        transportSecurity: self.transportSecurity
      ),
      interceptors: self.interceptors,
      handleClient: body
    )
  }
}

/// Options every table-printing client subcommand shares: the connection, and `--json`.
struct ClientOptions: ParsableArguments {
  @OptionGroup var connection: ConnectionOptions

  @Flag(help: "Print JSON instead of a table.")
  var json = false

  /// Call options with the `--deadline-ms` timeout.
  var callOptions: CallOptions { self.connection.callOptions }

  /// Runs `body` with a connected client, closing it afterwards.
  func withClient<T: Sendable>(
    _ body: (GRPCClient<HTTP2ClientTransport.Posix>) async throws -> T
  ) async throws -> T {
    try await self.connection.withClient(body)
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`, for rates.
  var seconds: Double {
    Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
  }

  /// The whole seconds, for flags counted in seconds.
  var wholeSeconds: Int { Int(self.components.seconds) }
  /// The whole milliseconds, for flags counted in milliseconds.
  var wholeMilliseconds: Int { self.wholeUnits(per: 1_000) }
  /// The whole microseconds, for flags counted in microseconds.
  var wholeMicroseconds: Int { self.wholeUnits(per: 1_000_000) }

  private func wholeUnits(per second: Int64) -> Int {
    Int(
      self.components.seconds * second + self.components.attoseconds
        / (1_000_000_000_000_000_000 / second)
    )
  }
}
