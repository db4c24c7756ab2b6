/// One row of the change log: something that happened to an employee, their picture or a
/// sale, written in the same transaction as the change itself.
public struct Change: Sendable, Hashable {
  /// What kind of entity changed.
  public enum Entity: Int, Sendable, Hashable {
    /// An employee row.
    case employee = 1
    /// An employee's picture and thumbnail.
    case picture = 2
    /// A sale of an employee.
    case sale = 3
  }

  /// What happened to it.
  public enum Kind: Int, Sendable, Hashable {
    /// Created.
    case inserted = 1
    /// Changed; `fields` says which fields.
    case updated = 2
    /// Removed.
    case deleted = 3
  }

  /// Position in the log: strictly increasing, without gaps, never reused.
  public var sequence: Int64
  /// What kind of entity changed.
  public var entity: Entity
  /// The guid of the employee the change belongs to.
  public var guid: String
  /// What happened.
  public var kind: Kind
  /// The changed field paths (Employee field names); empty for inserts and deletes.
  public var fields: [String]
  /// Who made the change, as the request said; empty when unknown.
  public var author: String
  /// When it was committed, in milliseconds since 1970.
  public var timeMillis: Int64

  /// Creates a change.
  public init(
    sequence: Int64,
    entity: Entity,
    guid: String,
    kind: Kind,
    fields: [String],
    author: String,
    timeMillis: Int64
  ) {
    self.sequence = sequence
    self.entity = entity
    self.guid = guid
    self.kind = kind
    self.fields = fields
    self.author = author
    self.timeMillis = timeMillis
  }
}

/// Who asks for a write, carried into the change log.
public struct WriteContext: Sendable, Hashable {
  /// The author recorded with every change the write makes; empty when unknown.
  public var author: String

  /// Creates a context for a write by `author`.
  public init(author: String = "") {
    self.author = author
  }
}
