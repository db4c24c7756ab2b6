internal import CThreadShim
package import GRPCCore
package import NIOCore
internal import NIOPosix

/// Runs each task's jobs on an event loop of `group`: the loop of the thread that enqueues the
/// job (so a task woken by its own connection stays on that connection's loop), or, from any
/// other thread (another group's loops included), the group's next loop.
///
/// The server's own tasks run here (grpc-swift's per-connection and per-stream work, and the
/// fast path's point calls, whose work beyond the store is small and fixed): such work then
/// costs no hop to the cooperative pool and back. Everything a service does beyond that
/// leaves the loops through `CooperativePoolInterceptor`.
package final class EventLoopGroupExecutor: TaskExecutor, Sendable {
  let group: any EventLoopGroup
  /// An executor per loop of the group, by the loop's identity.
  private let executors: [ObjectIdentifier: LoopExecutor]

  package init(group: any EventLoopGroup) {
    self.group = group
    self.executors = Dictionary(
      uniqueKeysWithValues: group.makeIterator().map {
        (ObjectIdentifier($0), LoopExecutor(loop: $0))
      }
    )
  }

  /// An executor that runs every job on `loop`, from whatever thread the job is enqueued:
  /// a call's task that a store thread resumes goes back to its connection's loop, not to
  /// the group's next one (which would then hop back to write the reply).
  func executor(for loop: any EventLoop) -> any TaskExecutor {
    self.executors[ObjectIdentifier(loop)] ?? self
  }

  package func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let current = MultiThreadedEventLoopGroup.currentEventLoop
    let loop =
      current.flatMap { self.executors[ObjectIdentifier($0)] != nil ? $0 : nil }
      ?? self.group.next()
    loop.execute {
      job.runSynchronously(on: self.asUnownedTaskExecutor())
    }
  }
}

/// Runs every job on one event loop.
private final class LoopExecutor: TaskExecutor, Sendable {
  let loop: any EventLoop

  init(loop: any EventLoop) {
    self.loop = loop
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    self.loop.execute {
      job.runSynchronously(on: self.asUnownedTaskExecutor())
    }
  }
}

/// Runs the services' handlers, and the bodies of their responses, on the cooperative pool,
/// whatever executor the call's task prefers: the server's tasks run on the event loops
/// (`EventLoopGroupExecutor`), where work whose cost grows with the data must never run.
/// First among the server's interceptors, so the others run on the pool too, as before.
package struct CooperativePoolInterceptor: ServerInterceptor {
  package init() {}

  package func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next:
      @concurrent @Sendable (StreamingServerRequest<Input>, ServerContext) async throws ->
      StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    var response = try await withTaskExecutorPreference(globalConcurrentExecutor) {
      try await next(request, context)
    }
    if case .success(var contents) = response.accepted {
      let producer = contents.producer
      contents.producer = { writer in
        try await withTaskExecutorPreference(globalConcurrentExecutor) {
          try await producer(writer)
        }
      }
      response.accepted = .success(contents)
    }
    return response
  }
}

/// How many event loops the server runs.
public enum ServerThreads {
  /// The CPUs this process may run on: its affinity mask (as `taskset` or `numactl` set it)
  /// within NIO's count (the cgroup's CPU quota or cpuset, else the machine's CPUs). NIO alone
  /// ignores the affinity mask: a server pinned to one CPU would run an event loop per CPU of
  /// the machine, taking turns on that one CPU.
  public static var availableCPUs: Int {
    let affinity = Int(roster_affinity_cpu_count())
    return affinity > 0 ? min(affinity, System.coreCount) : System.coreCount
  }

  /// Sizes NIO's shared event-loop group; only before anything has used it (NIO's rule: early
  /// in `main`, once).
  public static func useEventLoops(_ count: Int) {
    NIOSingletons.groupLoopCountSuggestion = count
  }
}
