public import RosterDomain

/// A store that can tell, before a call starts, that it would refuse the call's work: its reads
/// are so far behind that work due by the call's deadline could not expect to start in time.
/// A transport asks on the thread that read the call, and refuses it there at once, spending
/// no task or handler on a call that would be refused anyway (its interceptors run once, to
/// log and count the refusal): past its capacity the server then goes on answering the calls
/// it admits within their deadlines (docs/performance.md, "Proven against what nobody planned
/// for").
///
/// ```swift
/// if let refusal = store.refusal(dueBy: arrived + timeout) { answer(.failure(refusal)) }
/// ```
public protocol StoreAdmission: Sendable {
  /// `resourceExhausted`, saying how long reads wait, for a call due by `deadline` that its
  /// store's reads could not expect to start in time; nil to go ahead. A refusal counts as
  /// one of the store's.
  func refusal(dueBy deadline: ContinuousClock.Instant) -> StoreError?
}
