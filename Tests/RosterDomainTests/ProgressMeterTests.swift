import RosterLocks
import Testing

@testable import RosterDomain

/// `ProgressMeter`: what a line says, when one is written, and `MeteredBatches` counting rows.
@Suite("Progress meter")
struct ProgressMeterTests {
  /// The lines a meter wrote.
  final class Written: Sendable {
    let lines = Locked<[String]>([])
    var output: ProgressMeter.Output {
      .lines(every: .zero) { line in self.lines.withLock { $0.append(line) } }
    }
  }

  @Test(
    "a line: the bar and the count of the total, the rate, the time left; the last line the time it took"
  )
  func lines() {
    let meter = ProgressMeter("sales", total: 1_000_000, output: .silent)
    let now = ContinuousClock.now
    let start = now - .seconds(10)
    let line = meter.line(250_000, now: now, since: start)
    #expect(line == "sales  [#####...............]  250,000 of 1,000,000  25,000/s  30.0 s left")
    #expect(
      meter.line(1_000_000, now: now, since: start, finished: true)
        == "sales  1,000,000  100,000/s  in 10.0 s"
    )
    let unknown = ProgressMeter("employees", output: .silent)
    #expect(
      unknown.line(1_234_567, now: now, since: now - .seconds(100))
        == "employees  1,234,567  12,345/s"
    )
    #expect(ProgressMeter.clock(185) == "3 min 05 s")
    #expect(ProgressMeter.clock(7_320) == "2 h 02 min")
  }

  @Test("lines as the rows go, then one last line; nothing after it")
  func writesAndFinishes() {
    let written = Written()
    let meter = ProgressMeter("rows", total: 10, output: written.output)
    meter.advance(by: 4)
    meter.advance(by: 6)
    meter.finish()
    meter.advance(by: 1)
    meter.finish()
    let lines = written.lines.withLock { $0 }
    #expect(lines.count == 3)
    #expect(lines.first?.hasPrefix("rows  [########............]  4 of 10") == true)
    #expect(lines.last?.hasPrefix("rows  10  ") == true && lines.last?.contains(" in ") == true)
  }

  @Test("MeteredBatches counts every row of every batch it hands on")
  func meteredBatches() async throws {
    let written = Written()
    let meter = ProgressMeter("rows", output: written.output)
    var seen = 0
    for try await batch in MeteredBatches(
      AsyncBatches(Array(0 ..< 2_500), size: 1_000),
      meter: meter
    ) {
      seen += batch.count
    }
    meter.finish()
    #expect(seen == 2_500)
    #expect(written.lines.withLock { $0.last?.hasPrefix("rows  2,500  ") } == true)
  }
}

/// `AsyncBatches` stops a bulk load between batches once its task is cancelled (a SIGTERM
/// during the server's seed).
@Suite("Async batches")
struct AsyncBatchesTests {
  @Test("a cancelled task's next batch throws CancellationError; batches before it come whole")
  func stopsWhenCancelled() async {
    let taken = await Task {
      var batches = 0
      do {
        for try await batch in AsyncBatches(Array(0 ..< 10_000), size: 100) {
          #expect(batch.count == 100)
          batches += 1
          if batches == 3 { withUnsafeCurrentTask { $0?.cancel() } }
        }
        return (batches, false)
      } catch {
        return (batches, error is CancellationError)
      }
    }.value
    #expect(taken.0 == 3)
    #expect(taken.1)
  }
}
