internal import RosterDomain
internal import RosterLocks

/// Where a bulk stream's own CPU work runs: decoding and checking the rows of an upsert or a
/// sales import (a million rows are a million protobuf messages to decode) runs on one store
/// thread at the writer's bulk niceness, not on the cooperative pool at the caller's priority,
/// so interactive calls keep the cores while the stream arrives. The writer already runs the
/// chunks themselves at that niceness (`WriteCoalescer`).
///
/// The task that consumes the stream prefers this executor (SE-0417), so every job of it, the
/// deserialising `next()` of gRPC's request sequence included, runs here. It is an unstructured
/// task whose result comes back through a thread at the usual priority: ending it on the bulk
/// thread would enqueue the caller's task from there, and a worker thread Dispatch started then
/// would run at the bulk niceness for good (`ThreadPriority`, rule 1).
final class BulkExecutor: TaskExecutor {
  private let thread: SerialThread

  init(niceness: Int32) {
    self.thread = SerialThread(name: "roster.bulk", niceness: niceness)
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    self.thread.run { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }

  /// Runs `body` on the bulk thread and returns its result (or error) to the caller. Cancelling
  /// the caller cancels `body`; task-local values (the call's `CallControl`) go with it.
  func run<T: Sendable>(_ body: sending @escaping () async throws -> T) async throws -> T {
    let inner = Locked<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))
    // `body` was sent here and runs once, in the task below; nothing else touches it.
    nonisolated(unsafe) let body = body
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<T, any Error>) in
        let task = Task(executorPreference: self) {
          let result: Result<T, any Error>
          do {
            result = .success(try await body())
          } catch {
            result = .failure(error)
          }
          SerialThread.answers.run { continuation.resume(with: result) }
        }
        let cancelled = inner.withLock { state in
          state.task = task
          return state.cancelled
        }
        if cancelled { task.cancel() }
      }
    } onCancel: {
      inner.withLock { state -> Task<Void, Never>? in
        state.cancelled = true
        return state.task
      }?.cancel()
    }
  }
}
