internal import RosterLocks
internal import Synchronization

/// What one call allows the store work it starts: when that work must stop, and whether the
/// call was cancelled.
///
/// The gRPC layer makes one per call and binds it with `CallControl.$current.withValue`; the
/// store's lanes read it, so a cancelled call or a passed deadline interrupts the SQLite
/// statement running for it. It holds no timer: a deadline costs a stored instant, checked
/// by the statement's progress handler and when a queued job is taken, and nothing outlives
/// the call.
///
/// ```swift
/// let control = CallControl(deadline: .now + .seconds(2))
/// try await CallControl.$current.withValue(control) {
///   try await store.countEmployees(filter: filter)
/// }
/// ```
public final class CallControl: Sendable {
  /// The control of the call the current task serves, if any.
  @TaskLocal public static var current: CallControl?

  /// When the call's work must stop; nil for no deadline.
  public let deadline: ContinuousClock.Instant?
  /// Whether the call's reads may be served by a hot standby: its method changes nothing and
  /// does not follow the primary's commit order.
  public let standbyReads: Bool
  /// The change (its sequence number in the change feed) the call's reads must see: a standby
  /// that has not replayed it does not serve them. Nil: whatever a standby holds.
  public let mustSee: Int64?
  /// The newest change the call's writes are in the feed by (0: none yet).
  private let written = Atomic<Int64>(0)
  private let cancelled = Atomic<Bool>(false)
  /// What to run when the call is cancelled: the lane jobs it has queued or running.
  private let hooks = Locked<[Int: @Sendable () -> Void]>([:])
  private let nextHook = Atomic<Int>(0)

  /// Creates a control that ends work at `deadline`; its reads may come from a standby when
  /// `standbyReads`, one that has replayed `mustSee` when that is set.
  public init(
    deadline: ContinuousClock.Instant?,
    standbyReads: Bool = false,
    mustSee: Int64? = nil
  ) {
    self.deadline = deadline
    self.standbyReads = standbyReads
    self.mustSee = mustSee
  }

  /// Records that the call's writes have committed, and are in the change feed by `sequence`
  /// (a store passes its feed's newest number once the write's transaction has committed).
  public func wrote(through sequence: Int64) {
    var known = self.written.load(ordering: .relaxed)
    while sequence > known {
      let (exchanged, original) = self.written.compareExchange(
        expected: known,
        desired: sequence,
        ordering: .relaxed
      )
      if exchanged { return }
      known = original
    }
  }

  /// The change token of the call's writes: a read that names it sees them, wherever it is
  /// served. Nil when the call wrote nothing.
  public var changeToken: Int64? {
    let sequence = self.written.load(ordering: .relaxed)
    return sequence > 0 ? sequence : nil
  }

  /// Whether the call was cancelled.
  public var isCancelled: Bool {
    self.cancelled.load(ordering: .relaxed)
  }

  /// Cancels the call: queued work is dropped at once and running statements are
  /// interrupted. Idempotent.
  public func cancel() {
    guard !self.cancelled.exchange(true, ordering: .relaxed) else { return }
    let hooks = self.hooks.withLock { hooks in
      defer { hooks.removeAll() }
      return Array(hooks.values)
    }
    for hook in hooks { hook() }
  }

  /// What work stopped for this call tells its caller: `deadlinePassed` once the deadline has
  /// passed, whether its timer or the work's own check saw it first, else `callCancelled`.
  /// (A transport's timer for `grpc-timeout` cancels the call as a departing client does; the
  /// deadline counts from the call's arrival, so the timer never fires before it.)
  package var stopError: StoreError {
    self.deadlineHasPassed ? .deadlinePassed : .callCancelled
  }

  /// `stopError` of `control`; `callCancelled` for work without one (its task was cancelled).
  package static func stopError(_ control: CallControl?) -> StoreError {
    control?.stopError ?? .callCancelled
  }

  /// Whether the call has a deadline and it has passed.
  package var deadlineHasPassed: Bool {
    guard let deadline = self.deadline else { return false }
    return ContinuousClock.now >= deadline
  }

  /// Throws when the call `control` serves is already over: `stopError` when it was
  /// cancelled or its deadline has passed; nothing for no control.
  package static func check(_ control: CallControl?) throws {
    guard let control else { return }
    if control.isCancelled || control.deadlineHasPassed { throw control.stopError }
  }

  /// Runs `hook` when the call is cancelled (at once if it already is) until the returned id
  /// is removed.
  package func addCancellationHook(_ hook: @escaping @Sendable () -> Void) -> Int? {
    let id = self.nextHook.add(1, ordering: .relaxed).oldValue
    let added = self.hooks.withLock { hooks in
      guard !self.isCancelled else { return false }
      hooks[id] = hook
      return true
    }
    if added { return id }
    hook()
    return nil
  }

  package func removeCancellationHook(_ id: Int?) {
    guard let id else { return }
    _ = self.hooks.withLock { $0.removeValue(forKey: id) }
  }
}
