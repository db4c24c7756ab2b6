import Foundation
import GRPCCore
import NIOCore
import NIOPosix
import RosterLocks
import RosterServices
import TestSupport
import Testing

@testable import RosterProtocols

/// Where the server's work runs: its own tasks on the event loops, the services' work on the
/// cooperative pool, and as many event loops as the CPUs the process may run on.
@Suite("Server threads", .timeLimit(.minutes(10)))
struct ServerThreadsTests {
  /// Whether the calling thread is one of NIO's event loops.
  private static var onEventLoop: Bool { MultiThreadedEventLoopGroup.currentEventLoop != nil }

  @Test(
    "a task on the loops' executor runs on a loop; a handler and its response's body, behind CooperativePoolInterceptor, on the pool"
  )
  func handlersLeaveTheLoops() async throws {
    let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let executor = EventLoopGroupExecutor(group: loops)
    let seen = Locked<[String: Bool]>([:])
    let context = ServerContext(
      descriptor: MethodDescriptor(fullyQualifiedService: "test.Probe", method: "Where"),
      remotePeer: "test",
      localPeer: "test",
      cancellation: ServerContext.RPCCancellationHandle()
    )
    try await withTaskExecutorPreference(executor) {
      seen.withLock { $0["server task"] = Self.onEventLoop }
      let response: StreamingServerResponse<String> = try await CooperativePoolInterceptor()
        .intercept(
          request: StreamingServerRequest(single: ServerRequest(metadata: [:], message: "where?")),
          context: context
        ) { _, _ in
          seen.withLock { $0["handler"] = Self.onEventLoop }
          return StreamingServerResponse { writer in
            seen.withLock { $0["response body"] = Self.onEventLoop }
            try await writer.write("here")
            return [:]
          }
        }
      let written = try await response.accepted.get().producer(
        RPCWriter(wrapping: CollectingWriter())
      )
      #expect(written.isEmpty)
      seen.withLock { $0["server task, after"] = Self.onEventLoop }
    }
    try await loops.shutdownGracefully()
    #expect(
      seen.withLock { $0 }
        == [
          "server task": true, "handler": false, "response body": false, "server task, after": true,
        ]
    )
  }

  @Test("a job enqueued from another group's event loop runs on the executor's own group")
  func jobsStayInTheirGroup() async throws {
    let ours = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let other = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let executor = EventLoopGroupExecutor(group: ours)
    let ourLoop = ours.next()
    let ranOn = other.next().makePromise(of: Bool.self)
    other.next().execute {
      // Created on the other group's loop thread, so the first job is enqueued from there.
      Task(executorPreference: executor) {
        ranOn.succeed(MultiThreadedEventLoopGroup.currentEventLoop === ourLoop)
      }
    }
    let onOurs = try await ranOn.futureResult.get()
    try await ours.shutdownGracefully()
    try await other.shutdownGracefully()
    #expect(onOurs)
  }

  @Test(
    "a fast-path call's task is cancelled by the default deadline whether it is known yet or not"
  )
  func cancellingTheCallsTask() async {
    // The deadline may pass before the call's task is attached: the signal is kept, and
    // applied when it is.
    let early = CallTask(arrived: .now)
    early.cancelCallTask()
    let first = Task { _ = try? await Task.sleep(for: .seconds(60)) }
    early.task.attach(first)
    #expect(first.isCancelled)

    let late = CallTask(arrived: .now)
    let second = Task { _ = try? await Task.sleep(for: .seconds(60)) }
    late.task.attach(second)
    #expect(!second.isCancelled)
    late.cancelCallTask()
    #expect(second.isCancelled)
    await first.value
    await second.value
  }

  @Test("roster serve pinned to one CPU runs one event loop; --event-loops sets the count")
  func eventLoopsFollowTheAffinityMask() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let database = directory + "/threads.sqlite"
    let pinned = try await RosterProcess.serve(
      arguments: ["--db", database, "--seed-employees", "0"],
      launcher: ["/usr/bin/taskset", "-c", "0"]
    )
    let pinnedLoops = try Self.eventLoopThreads(pinned.processIdentifier)
    pinned.terminate()
    #expect(pinnedLoops == 1)
    let three = try await RosterProcess.serve(
      arguments: ["--db", database, "--seed-employees", "0", "--event-loops", "3"],
      launcher: ["/usr/bin/taskset", "-c", "0"]
    )
    let threeLoops = try Self.eventLoopThreads(three.processIdentifier)
    three.terminate()
    #expect(threeLoops == 3)
  }

  /// The threads of NIO's shared event-loop group in process `pid` (named `NIO-SGLTN-G-#N`).
  private static func eventLoopThreads(_ pid: Int32) throws -> Int {
    let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
    return try tasks.filter { task in
      let name = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)
      return name.hasPrefix("NIO-SGLTN-") && name.contains("-#")
    }.count
  }
}

/// An `RPCWriter` target that keeps nothing.
private struct CollectingWriter: RPCWriterProtocol {
  func write(_ element: String) async throws {}
  func write(contentsOf elements: some Sequence<String>) async throws {}
}
