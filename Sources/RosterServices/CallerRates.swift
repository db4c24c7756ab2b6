internal import CoreMetrics
internal import Foundation
public import GRPCCore
internal import GRPCProtobuf
internal import RosterLocks

/// How many calls a caller may make: `perSecond` on average, `burst` at once after a quiet
/// spell (a token bucket's rate and depth).
public struct CallerRate: Sendable, Hashable {
  public var perSecond: Double
  public var burst: Double

  /// `burst` defaults to a tenth of a second's calls, but at least 10 (and at most the rate):
  /// a deep bucket lets a caller's calls arrive in bunches, which the others wait behind.
  public init(perSecond: Double, burst: Double? = nil) {
    self.perSecond = perSecond
    self.burst = max(1, burst ?? min(perSecond, max(10, perSecond / 10)))
  }
}

/// What stops reading from a caller's connection for a while: the transport's, given to
/// `CallerRateInterceptor` so that a caller past its rate stops costing the server a refusal
/// per call.
public protocol CallerPausing: Sendable {
  /// Stops reading from the connection of `peer` (`ServerContext.remotePeer`) for `duration`.
  func pause(peer: String, for duration: Duration)
}

/// Fair limits per caller: a token bucket for each principal (for each peer address on a
/// server without tokens), at the rate of the caller's role, so one caller sending cheap calls
/// as fast as it can cannot take the server from the rest. A call past its caller's bucket is
/// `RESOURCE_EXHAUSTED` with `google.rpc.RetryInfo` (how long until the bucket holds a call)
/// in `grpc-status-details-bin`, which the Connect protocol carries as an error detail; each
/// counts on `roster_rpc_rate_limited_total`. The open services (health, reflection) are
/// never limited. With `pausing`, a caller refused `ignoredRefusals` times since its bucket
/// was last half full (one that ignores `RetryInfo`) also has its connection read no more until
/// the bucket is half full again, and for `ignoredPause` at least, counted on `roster_rpc_rate_pauses_total`: the flood then fills
/// its own socket buffer, not the server's event loops. Every call on that connection waits
/// meanwhile, whoever's it is: a gateway that carries many callers on one connection should
/// heed `RetryInfo` itself.
///
/// ```swift
/// CallerRateInterceptor(rate: CallerRate(perSecond: 500, burst: 1000), byRole: [.admin: CallerRate(perSecond: 5000)])
/// ```
public final class CallerRateInterceptor: CallInterceptor {
  private let rate: CallerRate?
  private let byRole: [Role: CallerRate]
  private let pausing: (any CallerPausing)?
  private let shards: [Shard]
  private let limited: Counter
  private let paused: Counter

  /// How many refusals since a caller's bucket was last half full show that it ignores
  /// `RetryInfo`: its connection is paused then.
  static let ignoredRefusals = 32
  /// The shortest pause of such a caller's connection.
  static let ignoredPause = Duration.seconds(1)

  /// The most buckets a shard keeps: past it, the buckets that have filled up again (their
  /// callers idle) are dropped, so the table stays as large as the callers active at once.
  static let bucketsPerShard = 4096

  /// Limits each caller to `rate`, or to `byRole[role]` for a caller of that role (nil `rate`:
  /// only the callers of those roles are limited).
  public init(
    rate: CallerRate?,
    byRole: [Role: CallerRate] = [:],
    pausing: (any CallerPausing)? = nil
  ) {
    self.rate = rate
    self.byRole = byRole
    self.pausing = pausing
    self.shards = (0 ..< 16).map { _ in Shard() }
    self.limited = Counter(label: "roster_rpc_rate_limited_total")
    self.paused = Counter(label: "roster_rpc_rate_pauses_total")
  }

  public func begin(_ call: inout CallScope) throws {
    guard call.method.required != nil else { return }
    guard let rate = call.caller?.role.flatMap({ self.byRole[$0] }) ?? self.rate else { return }
    let client =
      call.principal.map { "principal:\($0)" }
      ?? StreamLimitInterceptor.address(of: call.context.remotePeer)
    let shard = self.shards[Int(UInt(bitPattern: client.hashValue) % UInt(self.shards.count))]
    let now = ContinuousClock.now
    guard let (wait, ignored) = shard.buckets.withLock({ $0.take(client, rate: rate, at: now) })
    else { return }
    self.limited.increment()
    if let pausing = self.pausing, ignored {
      // Until the bucket is half full, and for `ignoredPause` at least: a pause of one call's
      // wait would let the flood back in at once, a refusal each.
      let refill = Duration.nanoseconds(Int64(rate.burst / 2 / rate.perSecond * 1e9))
      pausing.pause(peer: call.context.remotePeer, for: max(wait, refill, Self.ignoredPause))
      self.paused.increment()
    }
    let status = GoogleRPCStatus(
      code: .resourceExhausted,
      message: "this caller is over \(Self.describe(rate.perSecond)) calls per second; retry after "
        + "\(Int((Double(wait.components.seconds) * 1e3 + Double(wait.components.attoseconds) / 1e15).rounded(.up))) ms",
      details: .retryInfo(delay: wait)
    )
    throw RPCError(status)
  }

  private static func describe(_ value: Double) -> String {
    value.rounded() == value ? String(Int(value)) : String(format: "%.3f", value)
  }

  /// One of the shards the callers are spread over by their hash, each behind its own lock.
  final class Shard: Sendable {
    let buckets = Locked(Buckets())
  }

  /// The buckets of one shard of the callers.
  struct Buckets {
    struct Bucket {
      var tokens: Double
      var updated: ContinuousClock.Instant
      /// Calls refused since the bucket was last half full.
      var refused = 0
    }
    var byClient: [String: Bucket] = [:]

    /// Takes a call from `client`'s bucket: nil when it held one, else how long until it does,
    /// and whether the caller has now been refused `ignoredRefusals` times since its bucket was
    /// last half full.
    mutating func take(
      _ client: String,
      rate: CallerRate,
      at now: ContinuousClock.Instant
    ) -> (wait: Duration, ignored: Bool)? {
      var bucket =
        self.byClient[client]
        ?? {
          if self.byClient.count >= CallerRateInterceptor.bucketsPerShard { self.prune(now, rate) }
          return Bucket(tokens: rate.burst, updated: now)
        }()
      let elapsed = now - bucket.updated
      let seconds =
        Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
      bucket.tokens = min(rate.burst, bucket.tokens + seconds * rate.perSecond)
      bucket.updated = now
      if bucket.tokens >= rate.burst / 2 { bucket.refused = 0 }
      defer { self.byClient[client] = bucket }
      guard bucket.tokens < 1 else {
        bucket.tokens -= 1
        return nil
      }
      bucket.refused += 1
      let wait = Duration.nanoseconds(
        Int64(((1 - bucket.tokens) / rate.perSecond * 1e9).rounded(.up))
      )
      // Once per so many refusals: each pauses the connection of the call it refuses.
      let ignored = bucket.refused >= CallerRateInterceptor.ignoredRefusals
      if ignored { bucket.refused = 0 }
      return (wait, ignored)
    }

    /// Drops the buckets that would be full by now: their callers have been idle.
    private mutating func prune(_ now: ContinuousClock.Instant, _ rate: CallerRate) {
      self.byClient = self.byClient.filter { _, bucket in
        let elapsed = now - bucket.updated
        let seconds =
          Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return bucket.tokens + seconds * rate.perSecond < rate.burst
      }
    }
  }
}
