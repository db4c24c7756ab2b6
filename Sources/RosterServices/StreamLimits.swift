internal import CoreMetrics
internal import GRPCCore
internal import RosterLocks
internal import RosterProto

/// Caps the open `StreamEmployees` and `WatchChanges` streams of each client, so one client
/// cannot tie up every reader. Over the cap → `RESOURCE_EXHAUSTED`.
///
/// A client is its authenticated principal when tokens are on (set by `AuthInterceptor`), its peer address otherwise. Behind a proxy every client shares the
/// proxy's address, so the cap is then one for all of them: turn tokens on there.
///
/// A slot is given back at the call's `end`, which `CallChain` runs on every path: the call
/// completes or fails, is cancelled or reset, loses its connection, or is dropped before its
/// response producer ever runs. `roster_stream_slots_in_use` shows the slots held.
public final class StreamLimitInterceptor: CallInterceptor {
  private let maximum: Int
  /// Open streams per client, and their sum (kept, not summed on every open and close).
  private struct Slots {
    var byClient: [String: Int] = [:]
    var total = 0
  }
  private let open = Locked(Slots())
  private let inUse: Gauge

  /// Allows `maximumPerClient` open streams per client.
  public convenience init(maximumPerClient: Int) {
    self.init(maximumPerClient: maximumPerClient, inUse: Gauge(label: "roster_stream_slots_in_use"))
  }

  /// As `init(maximumPerClient:)`, showing the slots held on `inUse`.
  init(maximumPerClient: Int, inUse: Gauge) {
    self.maximum = maximumPerClient
    self.inUse = inUse
  }

  /// Slots held now, over all clients.
  public var slotsInUse: Int { self.open.withLock { $0.total } }

  public func begin(_ call: inout CallScope) throws {
    // The methods counted: those whose `roster.v1.policy` says `per_client_stream`.
    guard call.method.perClientStream else { return }
    call.streamSlot = try self.admit(principal: call.principal, peer: call.context.remotePeer)
  }

  public func end(_ call: CallScope, error: inout (any Error)?) {
    if let client = call.streamSlot { self.release(client) }
  }

  /// Takes a slot of the call's client, or refuses the call when the client holds them all;
  /// the client, for `release`.
  private func admit(principal: String?, peer: String) throws -> String {
    let client = principal.map { "principal:\($0)" } ?? Self.address(of: peer)
    let admitted = self.open.withLock { open -> Bool in
      guard open.byClient[client, default: 0] < self.maximum else { return false }
      open.byClient[client, default: 0] += 1
      open.total += 1
      self.inUse.record(open.total)
      return true
    }
    guard admitted else {
      throw RPCError(
        code: .resourceExhausted,
        message:
          "at most \(self.maximum) open StreamEmployees and WatchChanges streams per client; close one first"
      )
    }
    return client
  }

  private func release(_ client: String) {
    self.open.withLock { open in
      open.byClient[client, default: 1] -= 1
      if open.byClient[client]! <= 0 { open.byClient[client] = nil }
      open.total -= 1
      // Under the lock: recorded after it, a release's total and an admission's could reach
      // the gauge in the other order, and it would show slots held that are free.
      self.inUse.record(open.total)
    }
  }

  /// The peer without its port: `ipv4:127.0.0.1:5555` → `ipv4:127.0.0.1`.
  static func address(of peer: String) -> String {
    guard let colon = peer.lastIndex(of: ":"), peer.hasPrefix("ipv") else { return peer }
    return String(peer[..<colon])
  }
}
