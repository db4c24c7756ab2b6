internal import Foundation
internal import GRDB
internal import RosterDomain
internal import RosterLocks

/// Counters of the single writer, for tests, metrics and benchmarks.
public struct WriterStatistics: Sendable, Hashable {
  /// Transactions committed.
  public var commits: Int = 0
  /// Requests that succeeded and were acknowledged after their commit.
  public var writes: Int = 0
  /// Requests that failed and were rolled back alone, inside their savepoint.
  public var failedWrites: Int = 0
  /// The most requests one transaction has held.
  public var largestBatch: Int = 0
  /// Requests refused because too many were already waiting.
  public var refused: Int = 0
}

/// The one writer of the store, with group commit.
///
/// Requests queue here and run on GRDB's writer queue, never on the caller's thread. The
/// writer takes every request that is waiting (up to `maximumBatch`), waits up to `window`
/// for more, and runs them all in one transaction, each inside its own savepoint so a
/// failing request rolls back alone. Callers are answered only after the commit that holds
/// their change, so one fsync acknowledges many writes.
///
/// A bulk chunk (one piece of an upsert, import or batch delete) runs in a transaction of its
/// own, with no savepoint around it, taking turns with batches of interactive requests so
/// neither starves. Alone, it needs no savepoint to fail in: its failure rolls back only
/// itself. And without an open savepoint, SQLite truncates its statement journal after every
/// statement instead of keeping, for the whole chunk, a copy of every page each statement
/// first touched (a large part of a sales import's time went to writing that journal).
final class WriteCoalescer: Sendable {
  /// What a request does once the commit is known: answer its caller.
  private typealias Completion = @Sendable (_ commitError: (any Error)?) -> Void

  private struct Job: Sendable {
    /// Whether this is a chunk of a bulk load.
    var isBulk: Bool
    /// When the request joined the queue.
    var enqueued = ContinuousClock.now
    /// Runs the request, inside its own savepoint unless it is alone in its transaction, and
    /// returns how to answer it.
    var run: @Sendable (Database, _ alone: Bool) -> (succeeded: Bool, complete: Completion)
  }

  private struct State {
    var interactive: [Job] = []
    var bulk: [Job] = []
    /// Whether a waiting bulk chunk goes next (set after each interactive batch).
    var bulkTurn = false
    var draining = false
    var statistics = WriterStatistics()
  }

  private let pool: DatabasePool
  private let configuration: WriterConfiguration
  private let afterCommit: @Sendable (Database) -> Void
  private let state = Locked(State())

  /// - Parameter afterCommit: runs on the writer after each commit, before callers are
  ///   answered; the change feed uses it to publish the new end of the log.
  init(
    pool: DatabasePool,
    configuration: WriterConfiguration,
    afterCommit: @escaping @Sendable (Database) -> Void
  ) {
    self.pool = pool
    self.configuration = configuration
    self.afterCommit = afterCommit
  }

  var statistics: WriterStatistics {
    self.state.withLock { $0.statistics }
  }

  /// Runs `body` in the next shared transaction and returns its result after the commit.
  ///
  /// - Parameter bulk: true for a chunk of a bulk load, which waits behind interactive work.
  /// - Throws: the error of `body` (its savepoint rolled back, its neighbours unharmed), the
  ///   commit's error, or `StoreError.resourceExhausted` when too many requests wait.
  func submit<T: Sendable>(
    bulk: Bool = false,
    _ body: @escaping @Sendable (Database) throws -> T
  ) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
      let job = Job(isBulk: bulk) { db, alone in
        do {
          let result: T
          if alone {
            result = try body(db)
          } else {
            var value: T?
            try db.inSavepoint {
              value = try body(db)
              return .commit
            }
            result = value!
          }
          return (
            true,
            { commitError in
              if let commitError {
                continuation.resume(throwing: commitError)
              } else {
                continuation.resume(returning: result)
              }
            }
          )
        } catch {
          return (false, { _ in continuation.resume(throwing: error) })
        }
      }
      let start = self.state.withLock { state -> Bool? in
        if state.interactive.count + state.bulk.count >= self.configuration.maximumPending {
          state.statistics.refused += 1
          return nil
        }
        if bulk { state.bulk.append(job) } else { state.interactive.append(job) }
        if state.draining { return false }
        state.draining = true
        return true
      }
      switch start {
      case nil:
        continuation.resume(
          throwing: StoreError(.resourceExhausted, "the writer is overloaded; retry with backoff")
        )
      case true?:
        self.pool.asyncWriteWithoutTransaction { db in self.drain(db) }
      case false?:
        break
      }
    }
  }

  // MARK: The writer loop

  private var batchLimit: Int {
    max(1, self.configuration.maximumBatch)
  }

  /// The next transaction's jobs: a batch of up to `limit` interactive requests, or one bulk
  /// chunk alone (`alone` true). They take turns while both wait. When nothing waits, marks
  /// the writer idle in the same critical section, so a request that arrives next restarts it.
  private func takeNext(limit: Int) -> (jobs: [Job], alone: Bool) {
    self.state.withLock { state in
      if !state.bulk.isEmpty && (state.bulkTurn || state.interactive.isEmpty) {
        state.bulkTurn = false
        return ([state.bulk.removeFirst()], true)
      }
      let count = min(limit, state.interactive.count)
      if count == 0 {
        state.draining = false
        return ([], false)
      }
      let jobs = Array(state.interactive.prefix(count))
      state.interactive.removeFirst(count)
      state.bulkTurn = true
      return (jobs, false)
    }
  }

  /// Up to `limit` more interactive requests, for a batch that waits for company.
  private func takeInteractive(limit: Int) -> [Job] {
    self.state.withLock { state in
      let count = min(limit, state.interactive.count)
      defer { state.interactive.removeFirst(count) }
      return Array(state.interactive.prefix(count))
    }
  }

  private func waitingCount() -> Int {
    self.state.withLock { $0.interactive.count }
  }

  /// Runs on GRDB's writer queue until no request waits.
  private func drain(_ db: Database) {
    let limit = self.batchLimit
    while true {
      var (batch, alone) = self.takeNext(limit: limit)
      if batch.isEmpty { return }
      if !alone, batch.count < limit, self.configuration.window > .zero {
        // Give concurrent requests a moment to join this commit.
        let deadline = ContinuousClock.now + self.configuration.window
        while ContinuousClock.now < deadline, batch.count + self.waitingCount() < limit {
          Thread.sleep(forTimeInterval: 0.000_1)
        }
        batch += self.takeInteractive(limit: limit - batch.count)
      }
      self.commit(batch, alone: alone, db)
    }
  }

  /// Where the writer connection keeps temporary data, statement journals included
  /// (`PRAGMA temp_store`). Usually a file, so that one set-based statement over a large
  /// table (a batch update of everyone) journals its pages on disk, not in the heap. Memory
  /// for a bulk chunk's transaction, whose many statements each journal a few pages: in the
  /// file every journaled page cost a pwrite, most of a large upsert's time when measured.
  static let tempStore = (usual: "FILE", bulk: "MEMORY")

  /// Sets where the writer keeps temporary data. A failure only costs speed: SQLite keeps the
  /// old setting, and every journal works in either place.
  private static func setTempStore(_ place: String, _ db: Database) {
    try? db.execute(sql: "PRAGMA temp_store = \(place)")
  }

  /// Runs `batch` in one transaction and answers every caller after the commit.
  private func commit(_ batch: [Job], alone: Bool, _ db: Database) {
    var completions: [Completion] = []
    var pending: [Completion] = []
    var failed = 0
    completions.reserveCapacity(batch.count)
    let started = ContinuousClock.now
    for job in batch {
      let wait = started - job.enqueued
      StoreMetrics.writerQueueWait.recordNanoseconds(wait.nanoseconds)
    }
    StoreMetrics.batchSize.record(batch.count)
    // Only a bulk chunk runs alone. SQLite reads the setting when a write transaction begins,
    // and it can only change outside one; it goes back afterwards because other code (the
    // store's `write`) also uses this connection.
    if alone { Self.setTempStore(Self.tempStore.bulk, db) }
    defer { if alone { Self.setTempStore(Self.tempStore.usual, db) } }
    // A bulk chunk yields the CPU to interactive work (the QoS lesson): the writer's thread
    // runs its statements at the bulk niceness, and goes back before it answers anyone (a
    // thread it starts would inherit the lower priority) and before GRDB's queue reuses it.
    var priority = PriorityScope(lowerTo: alone ? self.configuration.bulkNiceness : 0)
    defer { priority.restore() }
    do {
      try db.beginTransaction(.immediate)
      for job in batch {
        let (succeeded, complete) = job.run(db, alone)
        if succeeded {
          pending.append(complete)
        } else {
          failed += 1
          completions.append(complete)
        }
        if !db.isInsideTransaction {
          // A failure SQLite could not contain in a savepoint (disk full, I/O error) rolled
          // the whole transaction back: the earlier requests of this batch are lost with it.
          throw StoreError(.resourceExhausted, "the write was rolled back; retry")
        }
      }
      if alone && failed > 0 {
        // A lone job has no savepoint: its failure rolls back its transaction, which holds
        // nothing else.
        try db.rollback()
        priority.restore()
        self.state.withLock { $0.statistics.failedWrites += failed }
        for complete in completions { complete(nil) }
        return
      }
      try db.commit()
    } catch {
      try? db.rollback()
      priority.restore()
      for complete in completions { complete(nil) }
      for complete in pending { complete(error) }
      self.state.withLock { $0.statistics.failedWrites += batch.count }
      return
    }
    self.state.withLock {
      $0.statistics.commits += 1
      $0.statistics.writes += pending.count
      $0.statistics.failedWrites += failed
      $0.statistics.largestBatch = max($0.statistics.largestBatch, batch.count)
    }
    StoreMetrics.commits.increment()
    priority.restore()
    self.afterCommit(db)
    for complete in completions { complete(nil) }
    for complete in pending { complete(nil) }
  }
}

/// Lowers the calling thread's priority until `restore`, when the process may raise it back
/// (`ThreadPriority.canRestore`); otherwise does nothing.
struct PriorityScope {
  private var previous: Int32?

  init(lowerTo niceness: Int32) {
    let current = ThreadPriority.current
    guard niceness > current, ThreadPriority.canRestore, ThreadPriority.set(niceness) else {
      return
    }
    self.previous = current
  }

  /// Puts the thread's priority back; idempotent.
  mutating func restore() {
    guard let previous = self.previous else { return }
    ThreadPriority.set(previous)
    self.previous = nil
  }
}
