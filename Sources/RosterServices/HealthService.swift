public import GRPCCore
internal import RosterDomain
internal import RosterLocks
public import RosterProto

/// `grpc.health.v1.Health`: per-service serving status for probes and load balancers.
///
/// `Check` does no I/O, which makes it the no-op ceiling every throughput benchmark is
/// measured against. Statuses change through ``HealthService/setServing(_:service:)``, for
/// example to `NOT_SERVING` when shutdown starts, and `Watch` streams every change.
public struct HealthService: Sendable {
  private let state: State

  /// The name that stands for the whole server.
  public static let overall = ""

  /// Creates the service with every name in `services` (and the whole server) serving.
  public init(services: [String]) {
    self.state = State(names: [Self.overall] + services)
  }

  /// Marks `service` (or the whole server, for the empty name) serving or not serving.
  public func setServing(_ serving: Bool, service: String = HealthService.overall) {
    self.state.set(serving ? .serving : .notServing, for: service)
  }

  /// Marks every known name serving or not serving.
  public func setAllServing(_ serving: Bool) {
    self.state.setAll(serving ? .serving : .notServing)
  }

  /// Marks everything `NOT_SERVING`, then ends every open `Watch` stream, so that graceful
  /// shutdown does not wait forever on watchers that never hang up.
  public func shutDown() {
    self.state.setAll(.notServing)
    self.state.finishAll()
  }
}

extension HealthService: Grpc_Health_V1_Health.SimpleServiceProtocol {
  /// The current status of one service, or of the server for the empty name.
  ///
  /// Statuses: `NOT_FOUND` for a service name the server does not know.
  public func check(
    request: Grpc_Health_V1_HealthCheckRequest,
    context: ServerContext
  ) async throws -> Grpc_Health_V1_HealthCheckResponse {
    try self.status(of: request)
  }

  /// `check`'s reply, which never waits: what the fast path runs without a task.
  public func status(
    of request: Grpc_Health_V1_HealthCheckRequest
  ) throws -> Grpc_Health_V1_HealthCheckResponse {
    guard let status = self.state.status(of: request.service) else {
      throw RPCError(
        code: .notFound,
        message: "service \(ClientText.quoted(request.service)) is not known"
      )
    }
    return .with { $0.status = status }
  }

  /// The current status, then every change, until the client cancels. An unknown name
  /// reports `SERVICE_UNKNOWN` and keeps the call open, as the health protocol asks.
  public func watch(
    request: Grpc_Health_V1_HealthCheckRequest,
    response: RPCWriter<Grpc_Health_V1_HealthCheckResponse>,
    context: ServerContext
  ) async throws {
    let (updates, id) = self.state.subscribe(to: request.service)
    defer { self.state.unsubscribe(id) }
    // The client going away cancels the RPC, not this task: end the updates then.
    try await withRPCCancellationHandler {
      var last: Grpc_Health_V1_HealthCheckResponse.ServingStatus?
      for await status in updates where status != last {
        last = status
        try await response.write(.with { $0.status = status })
      }
    } onCancelRPC: {
      self.state.unsubscribe(id)
    }
  }
}

extension HealthService {
  typealias Status = Grpc_Health_V1_HealthCheckResponse.ServingStatus

  /// Statuses and watchers behind one lock; watchers get updates through their own stream,
  /// so a slow watcher never holds the lock.
  final class State: Sendable {
    private struct Watcher {
      var name: String
      var continuation: AsyncStream<Status>.Continuation
    }

    private struct Storage {
      var statuses: [String: Status]
      var watchers: [Int: Watcher] = [:]
      var nextID = 0
    }

    private let storage: Locked<Storage>

    init(names: [String]) {
      self.storage = Locked(
        Storage(statuses: Dictionary(uniqueKeysWithValues: names.map { ($0, .serving) }))
      )
    }

    func status(of name: String) -> Status? {
      self.storage.withLock { $0.statuses[name] }
    }

    func set(_ status: Status, for name: String) {
      self.storage.withLock { storage in
        storage.statuses[name] = status
        for watcher in storage.watchers.values where watcher.name == name {
          watcher.continuation.yield(status)
        }
      }
    }

    func setAll(_ status: Status) {
      self.storage.withLock { storage in
        for name in storage.statuses.keys { storage.statuses[name] = status }
        for watcher in storage.watchers.values { watcher.continuation.yield(status) }
      }
    }

    func finishAll() {
      let watchers = self.storage.withLock { storage in
        defer { storage.watchers.removeAll() }
        return Array(storage.watchers.values)
      }
      for watcher in watchers { watcher.continuation.finish() }
    }

    func subscribe(to name: String) -> (AsyncStream<Status>, Int) {
      let (stream, continuation) = AsyncStream.makeStream(
        of: Status.self,
        bufferingPolicy: .bufferingNewest(1)
      )
      let id = self.storage.withLock { storage in
        let id = storage.nextID
        storage.nextID += 1
        storage.watchers[id] = Watcher(name: name, continuation: continuation)
        continuation.yield(storage.statuses[name] ?? .serviceUnknown)
        return id
      }
      return (stream, id)
    }

    func unsubscribe(_ id: Int) {
      let watcher = self.storage.withLock { $0.watchers.removeValue(forKey: id) }
      watcher?.continuation.finish()
    }
  }
}
