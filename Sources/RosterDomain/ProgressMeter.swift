public import Foundation
internal import RosterLocks

/// How far one long step has got (employees imported, sales copied, pictures hashed): done so
/// far, the rate, and the time left when the total is known. Every long command shows its
/// steps through it: a bar redrawn in place on a terminal, a plain line every few seconds
/// elsewhere (a log, a pipe), and a last line when the step ends.
///
/// ```swift
/// let meter = ProgressMeter("sales", total: 10_000_000, output: .standardError)
/// for batch in batches { try await store.insert(batch); meter.advance(by: batch.count) }
/// meter.finish()
/// ```
public final class ProgressMeter: Sendable {
  /// Where a meter shows itself.
  public struct Output: Sendable {
    let redraws: Bool
    let every: Duration
    let write: @Sendable (String) -> Void

    /// Standard error: a bar redrawn at most ten times a second on a terminal, else a line
    /// every 10 s.
    public static var standardError: Output {
      let terminal = isatty(STDERR_FILENO) == 1
      return Output(redraws: terminal, every: terminal ? .milliseconds(100) : .seconds(10)) {
        FileHandle.standardError.write(Data($0.utf8))
      }
    }

    /// A line every `every` to `write` (a logger), and the last one.
    public static func lines(
      every: Duration,
      _ write: @escaping @Sendable (String) -> Void
    ) -> Output {
      Output(redraws: false, every: every) { write($0.trimmingCharacters(in: .newlines)) }
    }

    /// Nothing.
    public static let silent = Output(redraws: false, every: .seconds(1 << 40)) { _ in }
  }

  private let label: String
  private let total: Int64?
  private let output: Output
  private let started = ContinuousClock.now
  private let state = Locked<(done: Int64, shown: ContinuousClock.Instant, finished: Bool)>(
    (0, ContinuousClock.now, false)
  )

  /// A meter for the step `label`, of `total` units when known.
  public init(_ label: String, total: Int64? = nil, output: Output) {
    self.label = label
    self.total = total.map { Swift.max(0, $0) }
    self.output = output
  }

  /// `count` more units done; shows the meter when it is due.
  public func advance(by count: Int) {
    let now = ContinuousClock.now
    let due: Int64? = self.state.withLock { state in
      state.done += Int64(count)
      guard !state.finished, now - state.shown >= self.output.every else { return nil }
      state.shown = now
      return state.done
    }
    if let due {
      self.output.write(
        self.output.redraws
          ? "\r" + self.line(due, now: now) + "\u{1B}[K" : self.line(due, now: now) + "\n"
      )
    }
  }

  /// Shows the last line: everything done, the time it took, the mean rate. Nothing for a
  /// step that had nothing to do.
  public func finish() {
    let done: Int64? = self.state.withLock { state in
      defer { state.finished = true }
      return state.finished ? nil : state.done
    }
    guard let done, done > 0 || self.total != 0 else { return }
    let line = self.line(done, now: .now, finished: true)
    self.output.write(self.output.redraws ? "\r" + line + "\u{1B}[K\n" : line + "\n")
  }

  /// `employees [#####.....] 120,000 of 1,000,000  45,000/s  19 s left`, or without the bar
  /// and the time left when the total is unknown.
  func line(
    _ done: Int64,
    now: ContinuousClock.Instant,
    since started: ContinuousClock.Instant? = nil,
    finished: Bool = false
  ) -> String {
    let elapsed = Self.seconds(now - (started ?? self.started))
    let rate = elapsed > 0 ? Double(done) / elapsed : 0
    var parts = [self.label]
    if let total = self.total, total > 0, !finished {
      let filled = Int(Swift.min(1, Double(done) / Double(total)) * 20)
      parts.append(
        "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled)
          + "]"
      )
      parts.append("\(Self.grouped(done)) of \(Self.grouped(total))")
    } else {
      parts.append(Self.grouped(done))
    }
    parts.append("\(Self.grouped(Int64(rate)))/s")
    if finished {
      parts.append("in " + Self.clock(elapsed))
    } else if let total = self.total, rate > 0, total > done {
      parts.append(Self.clock(Double(total - done) / rate) + " left")
    }
    return parts.joined(separator: "  ")
  }

  static func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
  }

  /// `1,234,567`.
  static func grouped(_ value: Int64) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (index, digit) in digits.enumerated() {
      if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
      out.append(digit)
    }
    return value < 0 ? "-" + out : out
  }

  /// `42 s`, `3 min 05 s`, `1 h 02 min`.
  static func clock(_ seconds: Double) -> String {
    let whole = Int(seconds.rounded())
    if whole < 60 { return String(format: "%.1f s", seconds) }
    if whole < 3600 { return String(format: "%d min %02d s", whole / 60, whole % 60) }
    return String(format: "%d h %02d min", whole / 3600, whole % 3600 / 60)
  }
}

/// `base`'s batches, each counted on `meter` as it is taken: the rows of a bulk load, shown
/// as they go into the store.
public struct MeteredBatches<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Base.Element: Collection {
  public typealias Element = Base.Element
  let base: Base
  let meter: ProgressMeter

  public init(_ base: Base, meter: ProgressMeter) {
    self.base = base
    self.meter = meter
  }

  public func makeAsyncIterator() -> Iterator {
    Iterator(base: self.base.makeAsyncIterator(), meter: self.meter)
  }

  public struct Iterator: AsyncIteratorProtocol {
    var base: Base.AsyncIterator
    let meter: ProgressMeter

    public mutating func next() async throws -> Element? {
      try await self.next(isolation: nil)
    }

    public mutating func next(
      isolation actor: isolated (any Actor)?
    ) async throws(Base.Failure) -> Element? {
      guard let batch = try await self.base.next(isolation: actor) else { return nil }
      self.meter.advance(by: batch.count)
      return batch
    }
  }
}
