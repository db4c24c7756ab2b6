import Foundation
// ThreadSanitizer does not see Swift's Synchronization.Mutex on Linux: four threads that touch
// an array only inside `withLock` are reported as a "Swift access race". Mutex locks with
// atomics and futexes inside the standard library, which is not instrumented, so TSan sees
// none of its acquires and releases. So Roster's locks are `RosterLocks.Locked`: a Mutex whose
// acquires and releases are told to TSan (`__tsan_acquire`, `__tsan_release`, from
// `CThreadShim` in a build with TSan); `RosterLocksTests` is this program with it.
//
//   swiftc -sanitize=thread Tests/Sanitizers/mutex-under-tsan.swift -o /tmp/m && /tmp/m
import Synchronization

final class Box: Sendable { let state = Mutex<[Int]>([]) }
let box = Box()
let threads = (0 ..< 4).map { i in
  Thread {
    for j in 0 ..< 20000 {
      box.state.withLock {
        $0.append(i * j)
        if $0.count > 100 { $0.removeFirst(50) }
      }
    }
  }
}
threads.forEach { $0.start() }
Thread.sleep(forTimeInterval: 2)
print(box.state.withLock { $0.count })
