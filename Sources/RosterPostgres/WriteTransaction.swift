internal import Logging
internal import PostgresNIO
internal import RosterDomain
internal import RosterStore

/// A prepared statement whose rows are read by column index, as the store's other queries are.
protocol RowStatement: PostgresPreparedStatement where Row == PostgresRandomAccessRow {}

extension RowStatement {
  func decodeRow(_ row: PostgresRow) throws -> PostgresRandomAccessRow {
    row.makeRandomAccess()
  }
}

/// A transaction in progress on one connection, and the changes it has made so far.
///
/// Used by one task at a time: the writer, or the task of a bulk write. Every statement checks
/// first that the connection is open (`checkOpen`).
final class WriteTransaction: @unchecked Sendable {
  let connection: PostgresConnection
  let logger: Logger
  var changes: [Change] = []
  /// Whether `record` keeps changes: not in a bulk load into an empty directory, which logs
  /// one gap at its end (`ChangeFeed.logsEachWrite`).
  let logsChanges: Bool

  init(connection: PostgresConnection, logger: Logger, logsChanges: Bool) {
    self.connection = connection
    self.logger = logger
    self.logsChanges = logsChanges
  }

  /// Runs one statement and returns its rows.
  @discardableResult
  func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
    try await self.connection.rows(query, logger: self.logger)
  }

  func row(_ query: PostgresQuery) async throws -> PostgresRandomAccessRow? {
    try await self.rows(query).first
  }

  func execute(_ query: PostgresQuery) async throws {
    try await self.rows(query)
  }

  /// Runs a prepared statement and returns its rows.
  func rows<Statement: PostgresPreparedStatement>(
    _ statement: Statement
  ) async throws -> [Statement.Row] {
    try self.connection.checkOpen()
    var rows: [Statement.Row] = []
    for try await row in try await self.connection.execute(statement, logger: self.logger) {
      rows.append(row)
    }
    return rows
  }

  /// Runs a prepared statement and returns its first row, if any.
  func row<Statement: PostgresPreparedStatement>(
    _ statement: Statement
  ) async throws -> Statement.Row? {
    try await self.rows(statement).first
  }

  /// Records a change, numbered when the transaction commits.
  func record(
    _ entity: Change.Entity,
    guid: String,
    kind: Change.Kind,
    fields: [String] = [],
    context: WriteContext,
    timeMillis: Int64
  ) {
    guard self.logsChanges else { return }
    self.changes.append(
      Change(
        sequence: 0,
        entity: entity,
        guid: guid,
        kind: kind,
        fields: fields,
        author: context.author,
        onBehalfOf: context.onBehalfOf,
        timeMillis: timeMillis
      )
    )
  }
}
