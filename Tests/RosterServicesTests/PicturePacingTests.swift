import Foundation
import GRPCCore
import GRPCInProcessTransport
import RosterDomain
import RosterLocks
import RosterProto
import RosterSQLite
import RosterSeed
import RosterServices
import Synchronization
import TestSupport
import Testing

/// `GetPicture` waits for the transport between spans of messages, so a download never runs
/// more than two spans ahead of what the transport has taken (issue 4's memory bound).
@Suite("Picture pacing", .timeLimit(.minutes(10)))
struct PicturePacingTests {
  /// A transport that takes nothing until `open()`: every `drained()` waits until then.
  final class Gate: ResponsePacing {
    private let state = Locked<
      (calls: Int, open: Bool, waiting: [CheckedContinuation<Void, Never>])
    >(
      (0, false, [])
    )

    var calls: Int { self.state.withLock { $0.calls } }

    func drained() async {
      await withCheckedContinuation { continuation in
        let resumeNow = self.state.withLock { state in
          state.calls += 1
          if state.open { return true }
          state.waiting.append(continuation)
          return false
        }
        if resumeNow { continuation.resume() }
      }
    }

    func open() {
      let waiting = self.state.withLock { state in
        state.open = true
        defer { state.waiting = [] }
        return state.waiting
      }
      for continuation in waiting { continuation.resume() }
    }
  }

  final class Counter: Sendable {
    let value = Atomic<Int>(0)
  }

  @Test("a download stops two spans ahead of a transport that takes nothing, then finishes intact")
  func downloadWaitsForTheTransport() async throws {
    let owner = makeEmployee(name: "Paced Picture", guid: "9ace0000-0000-4000-8000-000000000001")
    // Noise that JPEG cannot shrink: several MB, so well over two spans of 64 KiB messages.
    let picture = try DemoPictures.jpeg(width: 2400, height: 1800, seed: 11, noise: 90, quality: 97)
    let span = PicturesService.messagesPerPacing
    try #require(picture.count > 3 * span * PicturesService.chunkSize)

    try await withTemporaryStore(extra: [owner]) { store in
      // Stored through the ordinary services first.
      try await withInProcessClient(store: store) { client in
        _ = try await PictureServiceTests.put(
          Roster_V1_Pictures.Client(wrapping: client),
          guid: owner.guid,
          picture
        )
      }

      let gate = Gate()
      let received = Counter()
      let service = PicturesService(store: store, pacing: gate)
      try await withInProcessClient(services: [service]) { client in
        let pictures = Roster_V1_Pictures.Client(wrapping: client)
        async let download: [UInt8] = pictures.getPicture(.with { $0.guid = owner.guid }) {
          response in
          var bytes: [UInt8] = []
          for try await message in response.messages {
            bytes += message.data
            received.value.add(1, ordering: .relaxed)
          }
          return bytes
        }

        // The handler marks after one span, and after the second waits on that mark.
        while gate.calls < 1 || received.value.load(ordering: .relaxed) < 2 * span {
          try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(
          received.value.load(ordering: .relaxed) == 2 * span,
          "messages ahead of the transport"
        )
        #expect(gate.calls == 1)

        gate.open()
        #expect(try await download == picture)
        #expect(
          received.value.load(ordering: .relaxed) == (picture.count + PicturesService.chunkSize - 1)
            / PicturesService.chunkSize
        )
      }
    }
  }
}
