internal import PostgresNIO
internal import RosterDomain
internal import RosterLocks
internal import Synchronization

/// Coalesced point reads: concurrent `GetEmployee` calls share one statement.
///
/// Each statement costs a round trip: a write to PostgreSQL's socket that wakes its backend, the
/// backend's work per statement, the answer read back, and postgres-nio's work around it (a
/// large share of a replica's samples per `GetEmployee`, `perf record`). So, as the writer
/// does for writes (group commit), at most `width` statements run at once, and the reads that
/// arrive meanwhile wait and go together in the next one (`guid = ANY($1)`, up to
/// `maximumBatch` guids).
///
/// Nothing waits for company: a read that finds a free place runs at once, on its own task
/// (the leader), with whatever was waiting. When its statement is done, it answers the reads it
/// carried and hands the next batch to one of the waiting reads, which leads it. A lone read
/// runs its statement on its own task; a batch of several runs on a task of its own, so that
/// a leader whose call is cancelled does not fail the others. A waiting read whose call is
/// cancelled answers at once; a batch it was in goes on for the others.
final class PointReads: Sendable {
  let width: Int
  let maximumBatch: Int

  init(width: Int, maximumBatch: Int = 64) {
    self.width = max(1, width)
    self.maximumBatch = max(1, maximumBatch)
  }

  private struct State {
    var waiting: [Waiter] = []
    var running = 0
  }

  private let state = Locked(State())
  /// Statements run so far (for tests: fewer than the reads when they were coalesced).
  let statements = Atomic<Int>(0)

  /// What a waiting read is told: its employee (or error), or to run the next batch.
  private enum Turn: Sendable {
    case answered(Result<Employee?, any Error>)
    case lead([Waiter])
  }

  /// One read's mailbox: told once (its answer, its cancellation, or to lead), whether it
  /// is waiting yet or not.
  private final class Waiter: Sendable {
    private enum Box {
      case empty
      case waiting(CheckedContinuation<Turn, Never>)
      case told(Turn)
      case done
    }

    let guid: String
    private let box = Locked(Box.empty)

    init(guid: String) {
      self.guid = guid
    }

    /// Whether this is the first thing the read is told (a cancelled read was told already).
    @discardableResult
    func tell(_ turn: Turn) -> Bool {
      let continuation = self.box.withLock { box -> CheckedContinuation<Turn, Never>?? in
        switch box {
        case .empty:
          box = .told(turn)
          return .some(nil)
        case .waiting(let continuation):
          box = .done
          return .some(continuation)
        case .told, .done:
          return nil
        }
      }
      guard let continuation else { return false }
      continuation?.resume(returning: turn)
      return true
    }

    /// What the read is told; `StoreError.callCancelled` (or `deadlinePassed`) at once when its
    /// task or call is cancelled.
    func turn(
      _ control: CallControl?,
      arrived: @escaping @Sendable () -> Void = {},
      left: @escaping @Sendable () -> Void = {}
    ) async -> Turn {
      let cancelled: @Sendable () -> Void = {
        if self.tell(.answered(.failure(CallControl.stopError(control)))) { left() }
      }
      let hook = control?.addCancellationHook(cancelled)
      defer { control?.removeCancellationHook(hook) }
      return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
          let told = self.box.withLock { box -> Turn? in
            if case .told(let turn) = box {
              box = .done
              return turn
            }
            box = .waiting(continuation)
            return nil
          }
          if let told {
            continuation.resume(returning: told)
          } else {
            arrived()
          }
        }
      } onCancel: {
        cancelled()
      }
    }
  }

  /// The whole employee with `guid`, or nil when there is none.
  func employee(guid: String, store: PostgresStore) async throws -> Employee? {
    // A free place: lead at once, with what waits.
    if let others = self.state.withLock({ state in self.claim(&state) }) {
      return try await self.lead(guid, others, store)
    }
    let waiter = Waiter(guid: guid)
    let turn = await waiter.turn(CallControl.current) {
      // Waiting now; a place may have come free since the first look.
      let others = self.state.withLock { state -> [Waiter]? in
        if let others = self.claim(&state) { return others }
        state.waiting.append(waiter)
        return nil
      }
      if let others { waiter.tell(.lead(others)) }
    } left: {
      // Out of the queue (unless a batch took it already), so cancelled reads cannot pile up.
      self.state.withLock { state in state.waiting.removeAll { $0 === waiter } }
    }
    switch turn {
    case .answered(let result): return try result.get()
    case .lead(let others): return try await self.lead(guid, others, store)
    }
  }

  /// Takes a place and the reads waiting (up to a batch, this one's place kept), or nil when
  /// every place is taken.
  private func claim(_ state: inout State) -> [Waiter]? {
    guard state.running < self.width else { return nil }
    state.running += 1
    return Self.take(&state, upTo: self.maximumBatch - 1)
  }

  /// The oldest `limit` waiting reads, out of the queue.
  private static func take(_ state: inout State, upTo limit: Int) -> [Waiter] {
    let count = min(state.waiting.count, limit)
    defer { state.waiting.removeFirst(count) }
    return Array(state.waiting.prefix(count))
  }

  /// Runs one statement for `guid` and `others`, answers them, passes the place on, and
  /// returns this read's own answer.
  ///
  /// Alone, the read runs it on its own task. With others, a task of the batch's own runs it,
  /// so a leader whose call is cancelled leaves without failing the others; the batch has the
  /// statement timeout and 5 s to answer (then its connection is closed, `LeftBehind`), so a
  /// database that stopped answering cannot hold a place for good.
  private func lead(
    _ guid: String,
    _ others: [Waiter],
    _ store: PostgresStore
  ) async throws -> Employee? {
    if others.isEmpty {
      let result = await self.run([guid], store)
      self.passOn()
      return try result.get()[guid]
    }
    let own = Waiter(guid: guid)
    let members = [own] + others
    Task {
      let answered = await FirstAnswer.within(store.answerTimeout) {
        let result = await self.run(members.map(\.guid), store)
        for member in members { member.tell(.answered(result.map { $0[member.guid] })) }
        return true
      }
      if !answered {
        for member in members { member.tell(.answered(.failure(PostgresStore.unreachable))) }
      }
      self.passOn()
    }
    switch await own.turn(CallControl.current) {
    case .answered(let result): return try result.get()
    case .lead: preconditionFailure("a batch's own leader is never handed another")
    }
  }

  private func run(
    _ guids: [String],
    _ store: PostgresStore
  ) async -> Result<[String: Employee], any Error> {
    self.statements.add(1, ordering: .relaxed)
    do {
      return .success(try await store.employeesByGuid(guids))
    } catch {
      return .failure(error)
    }
  }

  /// Hands the next batch to one of its reads, or gives the place back when none waits.
  private func passOn() {
    while true {
      guard
        var next = self.state.withLock({ state -> [Waiter]? in
          if state.waiting.isEmpty {
            state.running -= 1
            return nil
          }
          // A whole batch: its first read leads it.
          return Self.take(&state, upTo: self.maximumBatch)
        })
      else { return }
      while !next.isEmpty {
        let leader = next.removeFirst()
        if leader.tell(.lead(next)) { return }
        // Cancelled since it was taken: the next one leads.
      }
    }
  }
}

/// Whole employees by guid, for `PointReads`: prepared once on each pooled connection.
struct EmployeesByGuid: RowStatement {
  static let fields = EmployeeFields.all
  static let sql = PostgresEmployeeSQL.select(Self.fields) + " WHERE e.guid = ANY($1::text[])"
  var guids: [String]

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 1)
    bindings.append(self.guids)
    return bindings
  }
}
