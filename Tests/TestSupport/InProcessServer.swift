public import GRPCCore
public import GRPCInProcessTransport
internal import RosterDomain
import RosterServer
public import RosterServices
public import RosterStore

/// Runs the real Roster services over an in-process transport and hands `body` a client.
///
/// The services come from the same `buildServices(store:)` that `roster serve` uses.
///
/// With `tokens`, calls are authenticated as on a real server; `clientInterceptors` can then
/// add a bearer token.
public func withInProcessClient<T: Sendable>(
  store: any StoreBackend,
  tokens: TokenTable? = nil,
  defaultDeadline: Duration? = nil,
  maxStreamsPerClient: Int? = nil,
  clientInterceptors: [any ClientInterceptor] = [],
  _ body: (GRPCClient<InProcessTransport.Client>) async throws -> T
) async throws -> T {
  let built = try buildServices(
    store: store,
    tokens: tokens,
    defaultDeadline: defaultDeadline,
    maxStreamsPerClient: maxStreamsPerClient
  )
  return try await withInProcessClient(
    services: built.services,
    interceptors: built.interceptors,
    clientInterceptors: clientInterceptors
  ) { client in
    // As on a real server's shutdown: end the change-feed watchers, whose handlers the
    // in-process transport does not cancel when a client stops reading.
    defer { store.closeChangeFeed() }
    return try await body(client)
  }
}

/// Runs `services` over an in-process transport and hands `body` a client.
public func withInProcessClient<T: Sendable>(
  services: [any RegistrableRPCService],
  interceptors: [any ServerInterceptor] = [],
  clientInterceptors: [any ClientInterceptor] = [],
  _ body: (GRPCClient<InProcessTransport.Client>) async throws -> T
) async throws -> T {
  let transport = InProcessTransport()
  let server = GRPCServer(
    transport: transport.server,
    services: services,
    interceptors: interceptors
  )
  return try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { try await server.serve() }
    defer { server.beginGracefulShutdown() }
    return try await withGRPCClient(transport: transport.client, interceptors: clientInterceptors) {
      client in
      try await body(client)
    }
  }
}
