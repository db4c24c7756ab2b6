import Foundation
import RosterLocks
import Testing

/// `Locked` guards its value; under `scripts/sanitize thread`, ThreadSanitizer sees its lock.
@Suite("Locked")
struct LockedTests {
  final class Box: Sendable {
    let state = Locked<[Int]>([])
    let done = Locked(0)
  }

  /// Four threads touch one array only inside `withLock`. Run plainly, no append is lost.
  /// Under ThreadSanitizer (`scripts/sanitize thread --filter RosterLocksTests`), it reports
  /// nothing; with the annotations taken out of `CThreadShim`, it reports a "Swift access
  /// race" here, as it does for a bare `Mutex` (`Tests/Sanitizers/mutex-under-tsan.swift`).
  @Test("threads that touch a value only inside withLock lose nothing")
  func threads() async throws {
    let box = Box()
    let threads = (0 ..< 4).map { i in
      Thread {
        for j in 0 ..< 5_000 {
          box.state.withLock { $0.append(i * 5_000 + j) }
        }
        box.done.withLock { $0 += 1 }
      }
    }
    for thread in threads { thread.start() }
    while box.done.withLock({ $0 }) < 4 { try await Task.sleep(for: .milliseconds(10)) }
    let values = box.state.withLock { $0 }
    #expect(values.count == 20_000)
    #expect(Set(values) == Set(0 ..< 20_000))
  }

  @Test("withLock returns its body's value and rethrows its error, leaving the value as set")
  func returnsAndThrows() {
    struct Refused: Error {}
    let locked = Locked(1)
    #expect(
      locked.withLock { value -> Int in
        value += 1
        return value * 10
      } == 20
    )
    #expect(throws: Refused.self) {
      try locked.withLock { value in
        value = 5
        throw Refused()
      }
    }
    #expect(locked.withLock { $0 } == 5)
  }
}
