/// An error the store throws on purpose, with a code callers can map to their own protocol.
///
/// The message is safe to show to clients: it names the offending input and never carries SQL.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What kind of failure this is. Open, so new codes never break callers.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private enum Wrapped: Hashable, Sendable {
      case notFound
      case alreadyExists
      case invalidArgument
      case outOfRange
      case resourceExhausted
      case unavailable
      case cancelled
      case deadlineExceeded
    }

    private let wrapped: Wrapped
    private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    /// A guid, department or other key that does not exist.
    public static let notFound = Code(.notFound)
    /// A key that is already taken.
    public static let alreadyExists = Code(.alreadyExists)
    /// Input that can never succeed as given.
    public static let invalidArgument = Code(.invalidArgument)
    /// A position (token, offset) outside what the store holds.
    public static let outOfRange = Code(.outOfRange)
    /// A size or count beyond a configured limit.
    public static let resourceExhausted = Code(.resourceExhausted)
    /// The store cannot serve this now (shutting down); retrying later may succeed.
    public static let unavailable = Code(.unavailable)
    /// The caller cancelled the call; its work was stopped.
    public static let cancelled = Code(.cancelled)
    /// The call's deadline, or the server's budget for one query, passed; its work was stopped.
    public static let deadlineExceeded = Code(.deadlineExceeded)

    public var description: String { String(describing: self.wrapped) }
  }

  /// The kind of failure.
  public var code: Code
  /// A client-safe explanation that names the field or key at fault.
  public var message: String

  /// Creates an error with a code and a client-safe message.
  public init(_ code: Code, _ message: String) {
    self.code = code
    self.message = message
  }

  public var description: String { "\(self.code): \(self.message)" }
}

extension StoreError {
  /// The work stopped because its call was cancelled.
  package static let callCancelled = StoreError(
    .cancelled,
    "the call was cancelled; its query was stopped"
  )
  /// The work stopped because its call's deadline passed.
  package static let deadlinePassed = StoreError(
    .deadlineExceeded,
    "the call's deadline passed; its query was stopped"
  )
  /// The work stopped because it ran past the server's budget for one query.
  package static let budgetSpent = StoreError(
    .deadlineExceeded,
    "the query ran past the server's limit for one query (--max-query-seconds); narrow it"
  )
}
