public import Histogram
internal import RosterLocks
internal import Synchronization

/// The counts and latencies of one scenario (or of all of them).
public struct Tally: Sendable {
  /// Latency in microseconds of every measured request, failed ones included: a request that
  /// timed out was slow, and leaving it out would flatter the tail.
  public var histogram: Histogram<UInt64>
  /// The same, of the requests that succeeded only: what admitted calls cost under overload.
  public var succeeded: Histogram<UInt64>
  /// The same, of the requests that failed only: how soon a refusal came.
  public var failed: Histogram<UInt64>
  /// Measured requests.
  public var requests = 0
  /// Measured requests that failed, by gRPC status code.
  public var errors: [Int: Int] = [:]
  /// Rows or bytes carried by the successful requests.
  public var items = 0

  init() {
    self.histogram = Self.histogram()
    self.succeeded = Self.histogram()
    self.failed = Self.histogram()
  }

  private static func histogram() -> Histogram<UInt64> {
    var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
    histogram.autoResize = true
    return histogram
  }

  mutating func record(microseconds: UInt64, status: Int?, items: Int) {
    _ = self.histogram.record(Swift.max(1, microseconds))
    self.requests += 1
    if let status {
      _ = self.failed.record(Swift.max(1, microseconds))
      self.errors[status, default: 0] += 1
    } else {
      _ = self.succeeded.record(Swift.max(1, microseconds))
      self.items += items
    }
  }

  mutating func add(_ other: Tally) {
    self.histogram.add(other.histogram)
    self.succeeded.add(other.succeeded)
    self.failed.add(other.failed)
    self.requests += other.requests
    self.items += other.items
    self.errors.merge(other.errors, uniquingKeysWith: +)
  }

  /// Failed requests.
  public var errorCount: Int { self.errors.values.reduce(0, +) }
}

/// Progress of a running load, taken once a second.
public struct LoadProgress: Sendable {
  /// Seconds since the load began, warm-up included.
  public var elapsed: Double
  /// Whether the warm-up is still running.
  public var warmingUp: Bool
  /// Requests per second over the last interval.
  public var qps: Double
  /// Latency over the last interval, in microseconds.
  public var p50: UInt64
  public var p99: UInt64
  /// Measured requests so far, and how many of them failed.
  public var requests: Int
  public var errors: Int
  /// Requests in flight now.
  public var inFlight: Int
}

/// Where completed requests are counted; shared by every sender.
final class LoadRecorder: Sendable {
  private struct State {
    var tallies: [Tally] = Scenario.allCases.map { _ in Tally() }
    var interval = Tally()
    var measuredRequests = 0
    var measuredErrors = 0
    var lastCompletion: ContinuousClock.Instant?
  }

  private let state = Locked(State())
  private let inFlightCount = Atomic<Int>(0)

  /// Counts a request as sent.
  func started() {
    self.inFlightCount.add(1, ordering: .relaxed)
  }

  /// Counts a completed request; only `measured` ones reach the final report.
  func finished(
    _ scenario: Scenario,
    latency: Duration,
    status: Int?,
    items: Int,
    measured: Bool,
    at now: ContinuousClock.Instant
  ) {
    self.inFlightCount.subtract(1, ordering: .relaxed)
    let microseconds = UInt64(Swift.max(0, latency.microseconds))
    self.state.withLock { state in
      state.interval.record(microseconds: microseconds, status: status, items: items)
      guard measured else { return }
      state.tallies[scenario.ordinal].record(
        microseconds: microseconds,
        status: status,
        items: items
      )
      state.measuredRequests += 1
      if status != nil { state.measuredErrors += 1 }
      state.lastCompletion = now
    }
  }

  /// Requests in flight now.
  var inFlight: Int { self.inFlightCount.load(ordering: .relaxed) }

  /// Takes the last interval's figures and starts a new interval.
  func takeInterval() -> (interval: Tally, requests: Int, errors: Int) {
    self.state.withLock { state in
      let interval = state.interval
      state.interval = Tally()
      return (interval, state.measuredRequests, state.measuredErrors)
    }
  }

  /// The measured tallies by scenario, and when the last measured request completed.
  func results() -> (tallies: [Scenario: Tally], lastCompletion: ContinuousClock.Instant?) {
    self.state.withLock { state in
      var tallies: [Scenario: Tally] = [:]
      for scenario in Scenario.allCases where state.tallies[scenario.ordinal].requests > 0 {
        tallies[scenario] = state.tallies[scenario.ordinal]
      }
      return (tallies, state.lastCompletion)
    }
  }
}

extension Duration {
  /// The duration in whole microseconds, rounded up so a fast call never reads as zero.
  var microseconds: Int64 {
    let (seconds, attoseconds) = self.components
    return seconds * 1_000_000 + (attoseconds + 999_999_999_999) / 1_000_000_000_000
  }

  /// The duration in whole milliseconds, rounded up.
  var milliseconds: Int64 {
    (self.microseconds + 999) / 1_000
  }

  /// The duration in seconds.
  var inSeconds: Double {
    Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
  }
}
