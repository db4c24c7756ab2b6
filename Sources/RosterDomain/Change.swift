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
  /// Who made the change: the caller's authenticated principal (`WriteContext.author`); empty
  /// when unknown.
  public var author: String
  /// Whom the author acted for, as the request said (`x-roster-author`), when the author's role
  /// allows it; empty otherwise.
  public var onBehalfOf: String
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
    onBehalfOf: String = "",
    timeMillis: Int64
  ) {
    self.sequence = sequence
    self.entity = entity
    self.guid = guid
    self.kind = kind
    self.fields = fields
    self.author = author
    self.onBehalfOf = onBehalfOf
    self.timeMillis = timeMillis
  }
}

/// Who asks for a write, carried into the change log.
public struct WriteContext: Sendable, Hashable {
  /// The author recorded with every change the write makes; empty when unknown.
  public var author: String
  /// Whom the author acts for, recorded beside it; empty when the author acts for themselves.
  public var onBehalfOf: String

  /// Creates a context for a write by `author`, on behalf of `onBehalfOf`.
  public init(author: String = "", onBehalfOf: String = "") {
    self.author = author
    self.onBehalfOf = onBehalfOf
  }
}
