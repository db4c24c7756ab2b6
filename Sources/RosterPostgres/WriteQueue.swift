internal import CoreMetrics
internal import PostgresNIO
internal import RosterDomain
internal import RosterLocks
internal import Synchronization

/// Group commit: interactive writes queue here, and one writer runs as many as are waiting
/// (up to `maximumBatch`) in one transaction, each in a savepoint of its own, so a failing
/// write rolls back alone and the others share one commit and one flush of the server's WAL.
///
/// A write returns only after the commit that holds it. Under no load a batch is one write,
/// so nothing waits for company.
final class WriteQueue: Sendable {
  /// One queued write. `run` executes it inside the batch's transaction and says how it
  /// went; `answer` tells its caller once the batch's fate is known.
  struct Job: Sendable {
    let run: @Sendable (WriteTransaction) async -> Outcome
    let fail: @Sendable (any Error) -> Void
    /// Whether the write runs in a savepoint of its own. A write without one must change
    /// nothing before it throws an error of its own (a `StoreError`); a failed statement
    /// aborts the batch's transaction, and the batch runs again without that write.
    let savepoint: Bool
    /// A write the batch may run in one statement with the writes of its kind beside it;
    /// nil for every other write.
    let joint: Joint?
    let queued = ContinuousClock.now
  }

  /// The same metrics as SQLite's writer.
  static let queueWait = Timer(label: "roster_writer_queue_wait_seconds")
  static let batchSize = Recorder(label: "roster_write_batch_size", aggregate: true)
  static let commits = Counter(label: "roster_commits_total")

  /// How a write went inside its savepoint: its error, if any, and how to answer its caller
  /// given the commit's error (a failed write answers with its own error whatever happens).
  struct Outcome: Sendable {
    let error: (any Error)?
    let answer: @Sendable ((any Error)?) -> Void
  }

  private struct State {
    var jobs: [Job] = []
    var closed = false
    /// The batch being committed, to expire when a shutdown's drain runs out of time.
    var running: FirstAnswer?
    /// When a shutdown's drain must end: the batches still waiting on PostgreSQL then are
    /// answered `unavailable`, so a silent database cannot hold up the process's exit.
    var drainEnd: ContinuousClock.Instant?
  }

  private let state = Locked(State())
  /// Updates and creates written in a statement shared with others (`EmployeeUpdates`,
  /// `EmployeeInserts`), for tests and diagnostics.
  let jointWrites = Atomic<Int>(0)
  private let signal: AsyncStream<Void>
  private let wake: AsyncStream<Void>.Continuation
  let maximumBatch: Int

  init(maximumBatch: Int) {
    self.maximumBatch = max(1, maximumBatch)
    (self.signal, self.wake) = AsyncStream.makeStream(
      of: Void.self,
      bufferingPolicy: .bufferingNewest(1)
    )
  }

  static let closedError = StoreError(
    .unavailable,
    "the server is shutting down; try another replica"
  )

  /// Queues `body` and returns its result once its transaction has committed.
  ///
  /// With `savepoint: false`, `body` saves the two round trips of a savepoint; it must then
  /// throw its own errors only before it changes anything (one statement that writes, checked
  /// after it ran, is the usual shape).
  func submit<T: Sendable>(
    savepoint: Bool = true,
    _ body: @escaping @Sendable (WriteTransaction) async throws -> T
  ) async throws -> T {
    try await self.enqueue { continuation in
      Job(
        run: { transaction in await Self.outcome(continuation) { try await body(transaction) } },
        fail: { error in continuation.resume(throwing: error) },
        savepoint: savepoint,
        joint: nil
      )
    }
  }

  /// Queues `statement`, an update without a savepoint, and returns what `finish` makes of the
  /// row it read once its transaction has committed. A batch runs the updates and creates of
  /// different employees that are next to each other in one statement of each kind
  /// (`EmployeeUpdates`, `EmployeeInserts`).
  func submitUpdate<T: Sendable>(
    _ statement: EmployeeUpdate,
    _ finish: @escaping @Sendable (WriteTransaction, PostgresRandomAccessRow?, Int64) throws -> T
  ) async throws -> T {
    try await self.enqueue { continuation in
      let end: @Sendable (WriteTransaction, PostgresRandomAccessRow?, Int64) async -> Outcome = {
        transaction,
        row,
        now in
        await Self.outcome(continuation) { try finish(transaction, row, now) }
      }
      return Job(
        run: { transaction in
          await Self.outcome(continuation) {
            var statement = statement
            statement.now = PostgresStore.nowMillis()
            return try finish(transaction, try await transaction.row(statement), statement.now)
          }
        },
        fail: { error in continuation.resume(throwing: error) },
        savepoint: false,
        joint: .update(statement, finish: end)
      )
    }
  }

  /// Queues `employee`'s insert, without a savepoint, and returns what `finish` makes of its
  /// row's id (nil: the guid is taken) once its transaction has committed; written together
  /// with the creates and updates beside it, as `submitUpdate`'s updates are.
  func submitInsert<T: Sendable>(
    _ employee: Employee,
    _ finish: @escaping @Sendable (WriteTransaction, Int64?, Int64) throws -> T
  ) async throws -> T {
    try await self.enqueue { continuation in
      let end: @Sendable (WriteTransaction, Int64?, Int64) async -> Outcome = {
        transaction,
        id,
        now in
        await Self.outcome(continuation) { try finish(transaction, id, now) }
      }
      return Job(
        run: { transaction in
          await Self.outcome(continuation) {
            let now = PostgresStore.nowMillis()
            return try finish(
              transaction,
              try await PostgresStore.insert(employee, now: now, in: transaction),
              now
            )
          }
        },
        fail: { error in continuation.resume(throwing: error) },
        savepoint: false,
        joint: .insert(employee, finish: end)
      )
    }
  }

  /// Queues the job `make` builds around the caller's continuation, and waits for its answer.
  private func enqueue<T: Sendable>(_ make: (AnswerOnce<T>) -> Job) async throws -> T {
    try await withCheckedThrowingContinuation { (checked: CheckedContinuation<T, any Error>) in
      // Answered once: by the batch, or by its timeout (`commit`), whichever comes first.
      let continuation = AnswerOnce(checked)
      let job = make(continuation)
      let accepted = self.state.withLock { state -> Bool in
        if state.closed { return false }
        state.jobs.append(job)
        return true
      }
      if accepted {
        self.wake.yield()
      } else {
        continuation.resume(throwing: Self.closedError)
      }
    }
  }

  /// How a write went: `body`'s value, answered once the commit is known, or its error.
  private static func outcome<T: Sendable>(
    _ continuation: AnswerOnce<T>,
    _ body: () async throws -> T
  ) async -> Outcome {
    do {
      let value = try await body()
      return Outcome(error: nil) { error in
        if let error {
          continuation.resume(throwing: error)
        } else {
          continuation.resume(returning: value)
        }
      }
    } catch {
      return Outcome(error: error) { _ in continuation.resume(throwing: error) }
    }
  }

  /// How long a shutdown lets the writer finish the writes it holds.
  static let drainLimit: Duration = .seconds(5)

  /// Refuses new writes and lets `run` finish the queued ones, for at most `drainLimit`.
  func close() async {
    let end = ContinuousClock.now + Self.drainLimit
    self.state.withLock { state in
      state.closed = true
      state.drainEnd = end
    }
    self.wake.finish()
    Task {
      try? await Task.sleep(until: end)
      self.state.withLock { $0.running }?.expire()
    }
  }

  /// The writer: runs batches until closed and drained.
  func run(_ store: PostgresStore) async {
    for await _ in self.signal {
      while let batch = self.take() {
        await self.commit(batch, store)
      }
    }
    // Closed, or cancelled: no write may be accepted that nothing would run.
    self.state.withLock { $0.closed = true }
    while let batch = self.take() { await self.commit(batch, store) }
  }

  private func take() -> [Job]? {
    self.state.withLock { state -> [Job]? in
      guard !state.jobs.isEmpty else { return nil }
      let count = min(self.maximumBatch, state.jobs.count)
      defer { state.jobs.removeFirst(count) }
      return Array(state.jobs.prefix(count))
    }
  }

  /// Runs one batch in one transaction, then answers every write in it.
  ///
  /// A batch whose transaction has not ended `batchTimeout` after it began is answered with
  /// `unavailable` and left behind, so the writes queued after it go on: measured in
  /// `Tests/Interop/replica/restart_test.py`, a PostgreSQL restart under load with TLS left a
  /// statement on a connection the server had closed waiting for an answer that never came
  /// (postgres-nio), and with it every later write.
  private func commit(_ batch: [Job], _ store: PostgresStore) async {
    let started = ContinuousClock.now
    for job in batch {
      let (seconds, attoseconds) = (started - job.queued).components
      Self.queueWait.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
    Self.batchSize.record(batch.count)
    var timeout = store.answerTimeout
    if let end = self.state.withLock({ $0.drainEnd }) {
      timeout = max(.zero, min(timeout, end - .now))
    }
    let ended = await FirstAnswer.within(
      timeout,
      started: { answer in self.state.withLock { $0.running = answer } }
    ) {
      await self.attempt(batch, store)
      return true
    }
    self.state.withLock { $0.running = nil }
    if !ended {
      store.logger.warning(
        "a write transaction got no answer from PostgreSQL; its writes are answered unavailable",
        metadata: ["writes": "\(batch.count)", "waited": "\(ContinuousClock.now - started)"]
      )
      for job in batch { job.fail(Self.unanswered) }
    }
  }

  static let unanswered = StoreError(
    .unavailable,
    "PostgreSQL stopped answering during the write, which may or may not have been applied; read before retrying"
  )

  private func attempt(_ batch: [Job], _ store: PostgresStore, together: Bool = true) async {
    var batch = batch
    var outcomes: [Outcome] = []
    /// A write without a savepoint whose statement failed: the transaction is aborted.
    struct Aborted: Error {
      let index: Int
      let error: any Error
    }
    /// A statement of several writes failed: the batch runs again, each write alone, so the
    /// one that failed answers with its error.
    struct TogetherFailed: Error {}
    do {
      try await store.transaction { transaction in
        outcomes = []
        // The change log's counter row first: a batch that locked employee rows and then
        // waited for the counter, while another replica's batch held the counter and waited
        // for one of those rows, deadlocked (found only after deadlock_timeout), and two
        // replicas' writes slowed to a crawl. Taken first, batches on different
        // replicas take turns instead, and still commit many writes each.
        _ = try await transaction.row(ChangeLogLock())
        var pending: ArraySlice<Job> = []
        var written = Written()
        var now: Int64 = 0
        for (index, job) in batch.enumerated() {
          if together, pending.isEmpty, let next = Self.writesTogether(batch, from: index) {
            // The updates and creates of different employees from here on: one statement of
            // each kind.
            now = PostgresStore.nowMillis()
            do {
              written = try await Self.write(next, now: now, in: transaction)
            } catch {
              if PostgresStore.isRetryable(error) { throw error }
              throw TogetherFailed()
            }
            pending = next
            self.jointWrites.add(next.count, ordering: .relaxed)
          }
          if job.savepoint { try await transaction.execute("SAVEPOINT write") }
          let kept = transaction.changes.count
          let outcome: Outcome
          if let joint = job.joint, !pending.isEmpty {
            pending.removeFirst()
            switch joint {
            case .update(let statement, let finish):
              outcome = await finish(transaction, written.rows[statement.guid], now)
            case .insert(let employee, let finish):
              outcome = await finish(transaction, written.ids[employee.guid], now)
            }
          } else {
            outcome = await job.run(transaction)
          }
          // The victim of a deadlock: the whole batch goes back and runs again (the locks its
          // earlier writes hold are what the other transaction waits for).
          if let error = outcome.error, PostgresStore.isRetryable(error) { throw error }
          if let error = outcome.error, !job.savepoint, !(error is StoreError) {
            throw Aborted(index: index, error: error)
          }
          if outcome.error == nil {
            if job.savepoint { try await transaction.execute("RELEASE SAVEPOINT write") }
          } else {
            if job.savepoint { try await transaction.execute("ROLLBACK TO SAVEPOINT write") }
            transaction.changes.removeSubrange(kept...)
          }
          outcomes.append(outcome)
        }
      }
      Self.commits.increment()
      for outcome in outcomes { outcome.answer(nil) }
    } catch is TogetherFailed {
      await self.attempt(batch, store, together: false)
    } catch let aborted as Aborted {
      // Nothing in the batch happened: the failed write answers with its error, the others
      // run again without it.
      batch[aborted.index].fail(PostgresStore.mapped(aborted.error))
      batch.remove(at: aborted.index)
      if !batch.isEmpty { await self.attempt(batch, store, together: together) }
    } catch {
      // The batch did not commit: nothing in it happened.
      let error = PostgresStore.mapped(error)
      for outcome in outcomes { outcome.answer(error) }
      for job in batch.dropFirst(outcomes.count) { job.fail(error) }
    }
  }
}

/// A continuation resumed at most once: later answers are dropped.
private final class AnswerOnce<T: Sendable>: Sendable {
  private let continuation: Locked<CheckedContinuation<T, any Error>?>

  init(_ continuation: CheckedContinuation<T, any Error>) {
    self.continuation = Locked(continuation)
  }

  func resume(returning value: T) {
    self.continuation.withLock { $0.take() }?.resume(returning: value)
  }

  func resume(throwing error: any Error) {
    self.continuation.withLock { $0.take() }?.resume(throwing: error)
  }
}

/// The change log's counter row, locked for the batch's transaction (prepared).
struct ChangeLogLock: RowStatement {
  static let sql = "SELECT 1 FROM change_log_state WHERE id = 1 FOR UPDATE"
  func makeBindings() throws -> PostgresBindings { PostgresBindings() }
}
