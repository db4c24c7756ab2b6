public import RosterDomain

/// A store that runs a whole point call as one synchronous job, where its point reads run:
/// SQLite's interactive lane (or the caller's thread, when point reads run inline). A transport
/// then answers `GetEmployee` without a task of its own: the call's interceptors, handler and
/// reply run in the job, which reads with `employeeNow`, and the reply goes back to the
/// connection from there, saving the task, its executor hops and the interceptors' async frames
/// (docs/performance.md, "What each part saved"). A backend whose reads wait on a
/// network (PostgreSQL) does not offer this.
///
/// ```swift
/// let cancel = store.runPointCall(deadline: deadline, { answer(call()) }, stopped: { error in
///   answer(.failure(error))
/// })
/// ```
public protocol PointCalls: Sendable {
  /// Runs `call` once where this store's point reads run, unless the call is refused first:
  /// then `stopped` runs instead, with `resourceExhausted` when the store is too busy to queue
  /// it or to start it before `deadline` (the call's, when it has one), or with `cancelled` when
  /// the returned closure was called while the call waited. A call that has begun runs to its
  /// end.
  func runPointCall(
    deadline: ContinuousClock.Instant?,
    _ call: @escaping @Sendable () -> Void,
    stopped: @escaping @Sendable (StoreError) -> Void
  ) -> @Sendable () -> Void

  /// `DirectoryStore.employee(guid:fields:)`, read on the calling thread: only inside a call
  /// that `runPointCall` runs. The call's `CallControl`, when it has one, is checked first.
  func employeeNow(guid: String, fields: EmployeeFields) throws -> Employee
}
