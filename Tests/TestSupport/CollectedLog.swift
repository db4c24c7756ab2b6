public import Logging
internal import RosterLocks

/// A log handler that keeps every line, for tests that check what was logged: each line's
/// message and its metadata as text.
///
/// ```swift
/// let log = CollectedLog()
/// let logger = Logger(label: "test") { _ in log }
/// ```
public final class CollectedLog: LogHandler, @unchecked Sendable {
  /// One logged line.
  public struct Line: Sendable {
    public var message: String
    public var metadata: [String: String]

    /// The message, then each `key=value`, sorted by key.
    public var text: String {
      ([self.message] + self.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        .joined(separator: " ")
    }
  }

  private let lines = Locked<[Line]>([])
  public var metadata: Logger.Metadata = [:]
  public var logLevel: Logger.Level = .trace

  public init() {}

  public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { self.metadata[key] }
    set { self.metadata[key] = newValue }
  }

  public func log(event: LogEvent) {
    let line = Line(
      message: event.message.description,
      metadata: (event.metadata ?? [:]).mapValues { "\($0)" }
    )
    self.lines.withLock { $0.append(line) }
  }

  /// The lines logged since the last `take`, and forgets them.
  public func take() -> [Line] {
    self.lines.withLock { lines in
      defer { lines.removeAll() }
      return lines
    }
  }
}
