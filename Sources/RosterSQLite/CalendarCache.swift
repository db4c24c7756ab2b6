internal import RosterDomain
internal import RosterLocks

/// The day-breakdown cache's counters.
public struct CalendarCacheStatistics: Sendable, Hashable {
  public var hits = 0
  public var misses = 0
}

/// Day breakdowns of a month, computed on first request and kept with the month's version;
/// any write to a sale of that month bumps the version, which retires exactly those entries.
final class CalendarCache: Sendable {
  struct Key: Hashable {
    var scope: SalesScope
    var month: String
  }
  private struct State {
    var entries: [Key: (version: Int64, days: [SalesCalendar.Period])] = [:]
    var statistics = CalendarCacheStatistics()
  }
  private let state = Locked(State())
  private let capacity = 10_000

  func get(_ key: Key, version: Int64) -> [SalesCalendar.Period]? {
    self.state.withLock { state in
      if let entry = state.entries[key], entry.version == version {
        state.statistics.hits += 1
        return entry.days
      }
      state.statistics.misses += 1
      return nil
    }
  }

  func put(_ key: Key, version: Int64, days: [SalesCalendar.Period]) {
    self.state.withLock { state in
      if state.entries.count >= self.capacity { state.entries.removeAll(keepingCapacity: true) }
      state.entries[key] = (version, days)
    }
  }

  var statistics: CalendarCacheStatistics { self.state.withLock { $0.statistics } }
}
