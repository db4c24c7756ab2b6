internal import CoreMetrics
internal import RosterLocks

/// Hot pictures in memory within a byte budget, least recently used out first.
public final class PictureCache: Sendable {
  private struct Entry {
    var bytes: [UInt8]
    var lastUse: UInt64
  }
  private struct State {
    var entries: [String: Entry] = [:]
    var bytes = 0
    var clock: UInt64 = 0
  }
  private let state = Locked(State())
  /// Lookups that found the picture, and that did not.
  private static let hits = Counter(label: "roster_picture_cache_hits_total")
  private static let misses = Counter(label: "roster_picture_cache_misses_total")
  /// The byte budget.
  public let budget: Int

  /// An empty cache of at most `budget` bytes.
  public init(budget: Int) {
    self.budget = budget
  }

  /// The largest picture worth caching: an eighth of the budget, so one picture never
  /// flushes the rest.
  public var largestEntry: Int { self.budget / 8 }

  /// Bytes of pictures held now.
  public var heldBytes: Int { self.state.withLock { $0.bytes } }

  /// The bytes of `etag`, if held.
  public func get(_ etag: String) -> [UInt8]? {
    self.state.withLock { state in
      state.clock += 1
      guard var entry = state.entries[etag] else {
        Self.misses.increment()
        return nil
      }
      Self.hits.increment()
      entry.lastUse = state.clock
      state.entries[etag] = entry
      return entry.bytes
    }
  }

  /// Holds `bytes` as `etag`, unless over `largestEntry`; the least recently used go first.
  public func put(_ etag: String, _ bytes: [UInt8]) {
    guard bytes.count <= self.largestEntry else { return }
    self.state.withLock { state in
      state.clock += 1
      if let old = state.entries[etag] { state.bytes -= old.bytes.count }
      state.entries[etag] = Entry(bytes: bytes, lastUse: state.clock)
      state.bytes += bytes.count
      while state.bytes > self.budget,
        let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })
      {
        state.entries[oldest.key] = nil
        state.bytes -= oldest.value.bytes.count
      }
    }
  }
}
