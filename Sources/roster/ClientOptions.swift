import ArgumentParser
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterServices

/// Options every client subcommand shares.
struct ClientOptions: ParsableArguments {
  @Option(help: "Server address as HOST:PORT (env ROSTER_TARGET).")
  var target: String = ProcessInfo.processInfo.environment["ROSTER_TARGET"] ?? "127.0.0.1:50051"

  @Option(help: "API token, sent as a bearer token (env ROSTER_TOKEN).")
  var token: String? = ProcessInfo.processInfo.environment["ROSTER_TOKEN"]

  @Flag(help: "Print JSON instead of a table.")
  var json = false

  func validate() throws {
    _ = try self.resolvedTarget()
  }

  /// The parsed target.
  func resolvedTarget() throws -> ResolvableTargets.IPv4 {
    let parts = self.target.split(separator: ":")
    guard parts.count == 2, let port = Int(parts[1]), (1...65535).contains(port) else {
      throw ValidationError("--target must be HOST:PORT, for example 127.0.0.1:50051")
    }
    let host = parts[0] == "localhost" ? "127.0.0.1" : String(parts[0])
    return .ipv4(address: host, port: port)
  }

  /// Runs `body` with a connected client, closing it afterwards.
  func withClient<T: Sendable>(
    _ body: (GRPCClient<HTTP2ClientTransport.Posix>) async throws -> T
  ) async throws -> T {
    try await withGRPCClient(
      transport: .http2NIOPosix(target: try self.resolvedTarget(), transportSecurity: .plaintext),
      interceptors: self.token.map { [BearerTokenInterceptor(token: $0)] } ?? [],
      handleClient: body
    )
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`, for rates.
  var seconds: Double {
    Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
  }
}
