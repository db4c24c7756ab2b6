import GRPCCore
import GRPCNIOTransportHTTP2
import NIOCore
import RosterSQLite
import RosterServer
import RosterServices
import RosterTransport

/// The oracle Roster's transport is compared with: grpc-swift's own HTTP/2 server
/// (`HTTP2ServerTransport.Posix`) running Roster's services and interceptors, in the test's
/// process, on a database `roster serve` made. It runs none of Roster's transport, so what it
/// answers is what grpc-swift answers; the one piece of Roster in its pipeline is the response
/// encoding rule (`ResponseEncodingFilter`), which the product's transport applies too.
///
/// It lives in the tests, not in `roster serve`: the product ships one transport.
final class GRPCSwiftReference: Sendable {
  /// The port it listens on, on 127.0.0.1.
  let port: Int
  private let server: GRPCServer<HTTP2ServerTransport.Posix>
  private let serving: Task<Void, any Error>

  private init(
    port: Int,
    server: GRPCServer<HTTP2ServerTransport.Posix>,
    serving: Task<Void, any Error>
  ) {
    self.port = port
    self.server = server
    self.serving = serving
  }

  /// A reference server over the SQLite database at `database`, with the limits `roster
  /// serve` takes as `--tokens`, `--max-request-kib` and `--default-deadline-ms` (nil for none).
  static func start(
    database: String,
    tokensFile: String,
    maxRequestBytes: Int,
    defaultDeadline: Duration?
  ) async throws -> GRPCSwiftReference {
    let store = try SQLiteStore(configuration: StoreConfiguration(path: database))
    let defaults = ServerConfig().limits
    let built = try buildServices(
      store: store,
      tokens: try TokenTable(contentsOfFile: tokensFile),
      defaultDeadline: defaultDeadline,
      maxStreamsPerClient: defaults.maxStreamsPerClient
    )
    let transport = HTTP2ServerTransport.Posix(
      address: .ipv4(host: "127.0.0.1", port: 0),
      transportSecurity: .plaintext,
      config: .defaults { transport in
        transport.rpc.maxRequestPayloadSize = maxRequestBytes
        transport.http2.maxConcurrentStreams = defaults.maxConcurrentStreams
        transport.connection.flushCoalescing = nil
        transport.compression.enabledAlgorithms = [.gzip, .deflate]
        transport.channelDebuggingCallbacks.onAcceptHTTP2Stream = { channel in
          channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
              ResponseEncodingFilter(),
              position: .first
            )
          }
        }
      }
    )
    let server = GRPCServer(
      transport: transport,
      services: built.services,
      interceptors: built.interceptors
    )
    let serving = Task { try await server.serve() }
    guard let port = try await transport.listeningAddress.ipv4?.port else {
      server.beginGracefulShutdown()
      throw RPCError(code: .internalError, message: "the reference server has no IPv4 address")
    }
    return GRPCSwiftReference(port: port, server: server, serving: serving)
  }

  /// Stops serving; calls in flight are cancelled.
  func stop() {
    self.server.beginGracefulShutdown()
    self.serving.cancel()
  }
}
