import CoreMetrics
import Dispatch
import Foundation
import GRPCCore
import RosterProto
import Testing

@testable import RosterServices

/// `StreamLimitInterceptor` on its own: who counts as one client, and a slot that comes back
/// when a response is dropped before its producer ever runs (the client went away first).
@Suite("Stream limits", .timeLimit(.minutes(10)))
struct StreamLimitTests {
  static func context(peer: String) -> ServerContext {
    ServerContext(
      descriptor: Roster_V1_Directory.Method.WatchChanges.descriptor,
      remotePeer: peer,
      localPeer: "test",
      cancellation: ServerContext.RPCCancellationHandle()
    )
  }

  /// Opens one stream as `principal` (nil: no tokens) from `peer`; the response is not run.
  static func open(
    _ limit: StreamLimitInterceptor,
    principal: String?,
    peer: String = "ipv4:10.0.0.1:5000"
  ) async throws -> StreamingServerResponse<Int> {
    try await CallChain([SignedIn(principal: principal), limit]).intercept(
      request: StreamingServerRequest(single: ServerRequest(metadata: [:], message: 0)),
      context: Self.context(peer: peer)
    ) { _, _ in
      StreamingServerResponse(single: ServerResponse(message: 1))
    }
  }

  /// What `AuthInterceptor` sets for a call whose token it took.
  struct SignedIn: CallInterceptor {
    let principal: String?
    func begin(_ call: inout CallScope) { call.principal = self.principal }
  }

  @Test("with tokens, each token holder has a cap of its own, even from one address (a proxy)")
  func perPrincipal() async throws {
    let limit = StreamLimitInterceptor(maximumPerClient: 2)
    var held: [StreamingServerResponse<Int>] = []
    for _ in 0 ..< 2 { held.append(try await Self.open(limit, principal: "a")) }
    await #expect(throws: RPCError.self) { _ = try await Self.open(limit, principal: "a") }
    // Another holder behind the same address still gets its streams.
    for _ in 0 ..< 2 { held.append(try await Self.open(limit, principal: "b")) }
    #expect(limit.slotsInUse == 4)
    // Without tokens, the address is the client: a new port is the same client.
    let open = StreamLimitInterceptor(maximumPerClient: 1)
    held.append(try await Self.open(open, principal: nil, peer: "ipv4:10.0.0.1:5000"))
    await #expect(throws: RPCError.self) {
      _ = try await Self.open(open, principal: nil, peer: "ipv4:10.0.0.1:6000")
    }
    withExtendedLifetime(held) {}
  }

  @Test("a response dropped before its producer runs gives its slot back")
  func droppedResponse() async throws {
    let limit = StreamLimitInterceptor(maximumPerClient: 2)
    var response: StreamingServerResponse<Int>? = try await Self.open(limit, principal: nil)
    #expect(limit.slotsInUse == 1)
    _ = response
    response = nil
    #expect(limit.slotsInUse == 0, "the slot of a response never run was kept")
    // And one that runs gives it back once, not twice.
    let ran = try await Self.open(limit, principal: nil)
    let other = try await Self.open(limit, principal: nil)
    #expect(limit.slotsInUse == 2)
    if case .success(let contents) = ran.accepted {
      let writer = RPCWriter(wrapping: DiscardingWriter<Int>())
      _ = try await contents.producer(writer)
    }
    #expect(limit.slotsInUse == 1)
    withExtendedLifetime((ran, other)) {}
  }

  @Test("the slots-in-use gauge shows the slots held, whichever thread records first")
  func gaugeFollowsTheSlots() async throws {
    // An admission whose thread is held up before it records its total, while a release
    // records the total after it: recorded outside the lock, the gauge ended on the stale
    // admission's total (the abuse suite saw 31 slots "held" on an idle server).
    let recorder = HeldRecorder()
    let limit = StreamLimitInterceptor(
      maximumPerClient: 10,
      inUse: Gauge(
        label: "roster_stream_slots_in_use",
        dimensions: [],
        aggregate: false,
        handler: recorder
      )
    )
    let first = try await Self.open(limit, principal: nil)
    recorder.holdNext()
    let admission = Task.detached { try await Self.open(limit, principal: nil) }
    while !recorder.isHeld { try await Task.sleep(for: .milliseconds(5)) }
    let release = Task.detached {
      guard case .success(let contents) = first.accepted else { return }
      _ = try? await contents.producer(RPCWriter(wrapping: DiscardingWriter<Int>()))
    }
    // The recorder lets the admission go by itself (`HeldRecorder.holdTime`): a release that
    // can record meanwhile (the fault) has done so by then; a correct one waits for the
    // admission, however long this takes.
    let second = try await admission.value
    await release.value
    #expect(limit.slotsInUse == 1)
    #expect(recorder.last == 1, "the gauge shows \(recorder.last) slots held, not 1")
    withExtendedLifetime(second) {}
  }
}

/// A gauge's recorder that can hold up the next thread that records, for `holdTime`.
///
/// It lets go by itself, on the held thread's own clock: a cooperative pool thread it holds
/// comes back whatever else runs, where a test task that had to wake to let it go could find
/// the pool's other threads blocked too (two on this machine; seen in CI, under load, as a
/// test that never ended).
final class HeldRecorder: RecorderHandler, @unchecked Sendable {
  static let holdTime: TimeInterval = 0.2
  private let lock = NSCondition()
  private var holding = false
  private var held = false
  private var values: [Int64] = []

  var last: Int64? { self.lock.withLock { self.values.last } }

  func holdNext() { self.lock.withLock { self.holding = true } }

  var isHeld: Bool { self.lock.withLock { self.held } }

  func record(_ value: Int64) {
    self.lock.withLock {
      if self.holding {
        self.holding = false
        self.held = true
        let until = Date(timeIntervalSinceNow: Self.holdTime)
        while self.lock.wait(until: until) {}
      }
      self.values.append(value)
    }
  }

  func record(_ value: Double) { self.record(Int64(value)) }
}

/// A writer that keeps nothing.
struct DiscardingWriter<Element: Sendable>: RPCWriterProtocol {
  func write(_ element: Element) async throws {}
  func write(contentsOf elements: some Sequence<Element>) async throws {}
}
