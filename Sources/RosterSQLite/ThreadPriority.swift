internal import CThreadShim
internal import Foundation
internal import RosterDomain
internal import RosterLocks

/// Per-thread priority (nice values) on Linux, and the two rules that make it safe here.
///
/// 1. A thread inherits its creator's nice value. A low-priority thread that answers a caller
///    (resumes a continuation) may make the Swift runtime or Dispatch start a worker thread, which
///    would then run every later task at the low priority. So low-priority threads never answer
///    callers themselves: they hand the answer to `SerialThread.answers`, whose thread runs at 0.
/// 2. Lowering a thread's priority is always allowed; raising it back needs `CAP_SYS_NICE` or
///    an `RLIMIT_NICE` that allows it (systemd `LimitNICE=+0`). Code that lowers a shared
///    thread's priority for a while (the writer's bulk chunks) does so only when
///    `canRestore` says it may go back.
enum ThreadPriority {
  /// The calling thread's nice value.
  static var current: Int32 { roster_thread_niceness() }

  /// Sets the calling thread's nice value; false when the system refused.
  @discardableResult
  static func set(_ niceness: Int32) -> Bool {
    roster_thread_set_niceness(niceness) == 0
  }

  /// Whether this process may raise a thread's priority back to where it was, tried once on a
  /// thread of its own.
  static let canRestore: Bool = {
    let result = Locked(false)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
      let before = ThreadPriority.current
      if ThreadPriority.set(before + 1) {
        result.withLock { $0 = ThreadPriority.set(before) }
      }
      done.signal()
    }
    thread.start()
    done.wait()
    return result.withLock { $0 }
  }()
}

/// One thread at a chosen priority that runs closures handed to it, in order. It starts when
/// work arrives and exits after a few idle seconds, unless it `stays`. `answers` is the one at
/// the usual priority through which threads at a lower priority answer their callers (see
/// `ThreadPriority`).
final class SerialThread: Sendable {
  private let name: String
  private let niceness: Int32
  private let stays: Bool
  private let core = LockedCondition(State())

  init(name: String, niceness: Int32, stays: Bool = false) {
    self.name = name
    self.niceness = niceness
    self.stays = stays
  }

  /// The process's thread at the usual priority for answering callers, shared by every lane
  /// and the bulk executor. Started by the store (`start()`) on the thread that opens it, and
  /// never idle-ended: a thread inherits its creator's nice value and cannot raise it again, so
  /// started by the first thread that hands it an answer (the bulk thread, at nice 10), it would
  /// answer at that priority, and every thread it started would inherit it.
  static let answers = SerialThread(name: "roster.answers", niceness: 0, stays: true)

  /// Starts the thread now unless it runs: from the calling thread, whose priority it inherits.
  func start() {
    self.core.withLock { state in self.launch(&state) }
  }

  /// Runs `body` soon on the thread.
  func run(_ body: @escaping @Sendable () -> Void) {
    self.core.withLock { state in
      state.queue.append(body)
      self.launch(&state)
      self.core.signal()
    }
  }

  private func launch(_ state: inout State) {
    guard !state.running else { return }
    state.running = true
    let thread = Thread {
      [core = self.core, name = self.name, niceness = self.niceness, stays = self.stays] in
      _ = roster_thread_setup(name, niceness)
      Self.work(core, stays: stays)
    }
    thread.start()
  }

  private static func work(_ core: LockedCondition<State>, stays: Bool) {
    while true {
      let batch: [@Sendable () -> Void]? = core.wait(
        until: Date(timeIntervalSinceNow: StoreLane.idleTimeout),
        for: { !$0.queue.isEmpty }
      ) { state, ready in
        guard ready else {
          if stays { return [] }
          state.running = false
          return nil
        }
        defer { state.queue.removeAll(keepingCapacity: true) }
        return state.queue
      }
      guard let batch else { return }
      for body in batch { body() }
    }
  }

  private struct State {
    var queue: [@Sendable () -> Void] = []
    var running = false
  }
}
