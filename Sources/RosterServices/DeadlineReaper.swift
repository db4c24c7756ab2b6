internal import RosterLocks

/// A one-shot signal from the reaper to a call: `wait` returns once `fire` was called, or when
/// the waiting task is cancelled.
final class Expiry: Sendable {
  private enum State {
    case idle
    case waiting(CheckedContinuation<Void, Never>)
    case done
  }
  private let state = Locked(State.idle)

  /// Whether `fire` was called.
  var fired: Bool {
    self.state.withLock { state in
      if case .done = state { return true }
      return false
    }
  }

  func fire() {
    let waiter: CheckedContinuation<Void, Never>? = self.state.withLock { state in
      defer { state = .done }
      if case .waiting(let continuation) = state { return continuation }
      return nil
    }
    waiter?.resume()
  }

  func wait() async {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumeNow = self.state.withLock { state -> Bool in
          if case .done = state { return true }
          state = .waiting(continuation)
          return false
        }
        if resumeNow { continuation.resume() }
      }
    } onCancel: {
      self.fire()
    }
  }
}

/// Watches the deadlines of many calls with one task, so no call needs a timer of its own.
///
/// Each call adds an entry when it starts and removes it when it ends; the reaper wakes every
/// `tick` while it has entries, runs the expiry of those whose deadline passed, and stops
/// when it has had none for a while. A deadline is therefore met within about one tick.
public final class DeadlineReaper: Sendable {
  private struct State {
    var entries: [Int: (end: ContinuousClock.Instant, expire: @Sendable () -> Void)] = [:]
    var nextID = 0
    var running = false
  }

  private let state = Locked(State())
  private let tick: Duration

  /// Creates a reaper that checks every `tick`.
  public init(tick: Duration = .milliseconds(20)) {
    self.tick = tick
  }

  /// How many calls it watches now.
  public var watched: Int { self.state.withLock { $0.entries.count } }

  /// Runs `expire` once `end` has passed, unless `forget` is called first.
  func watch(until end: ContinuousClock.Instant, expire: @escaping @Sendable () -> Void) -> Int {
    let (id, start) = self.state.withLock { state in
      let id = state.nextID
      state.nextID &+= 1
      state.entries[id] = (end, expire)
      defer { state.running = true }
      return (id, !state.running)
    }
    if start {
      // One task for every call, alive only while there are calls to watch.
      Task { await self.reap() }
    }
    return id
  }

  func forget(_ id: Int) {
    _ = self.state.withLock { $0.entries.removeValue(forKey: id) }
  }

  private func reap() async {
    var idleTicks = 0
    while true {
      try? await Task.sleep(for: self.tick)
      let now = ContinuousClock.now
      let (expired, stop): ([@Sendable () -> Void], Bool) = self.state.withLock { state in
        var expired: [@Sendable () -> Void] = []
        for (id, entry) in state.entries where entry.end <= now {
          expired.append(entry.expire)
          state.entries[id] = nil
        }
        idleTicks = state.entries.isEmpty ? idleTicks + 1 : 0
        // Idle for about a second: stop; the next call starts a new reaper.
        if idleTicks >= 50 {
          state.running = false
          return (expired, true)
        }
        return (expired, false)
      }
      for expire in expired { expire() }
      if stop { return }
    }
  }
}
