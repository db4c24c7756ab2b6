internal import GRDB
public import RosterDomain

extension SQLiteStore {
  // MARK: Change log

  /// The sequence number of the newest change ever recorded (0 before the first).
  ///
  /// Read from `sqlite_sequence`, so it survives pruning of every row.
  static func lastSequence(_ db: Database) throws -> Int64 {
    try Int64.fetchOne(
      db.cachedStatement(sql: "SELECT seq FROM sqlite_sequence WHERE name = 'change_log'")
    ) ?? 0
  }

  /// Appends one change to the log; called inside the transaction of the change itself. Not
  /// during a bulk load into an empty directory (`withBulkLoad`), whose end logs a gap.
  func record(
    _ db: Database,
    entity: Change.Entity,
    guid: String,
    kind: Change.Kind,
    fields: [String] = [],
    context: WriteContext,
    timeMillis: Int64
  ) throws {
    guard self.feed.logsEachWrite else { return }
    let statement = try db.cachedStatement(
      sql: """
        INSERT INTO change_log (entity, guid, kind, fields, author, on_behalf_of, time)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        """
    )
    try statement.execute(arguments: [
      entity.rawValue, guid, kind.rawValue, fields.joined(separator: ","), context.author,
      context.onBehalfOf, timeMillis,
    ])
  }

  /// The newest sequence number committed: a position to watch "from now".
  public var latestChange: Int64 {
    self.feed.latest
  }

  /// Up to `limit` changes strictly after `sequence`, oldest first.
  ///
  /// - Throws: `StoreError.outOfRange` when changes after `sequence` were already pruned, or
  ///   when `sequence` is past the end of the log (a token from another database).
  public func changes(after sequence: Int64, limit: Int) async throws -> [Change] {
    precondition(limit > 0 && limit <= StoreLimits.maximumChangePage)
    return try await self.read(.interactive) { db in
      let prunedThrough =
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT pruned_through FROM change_log_state"))
        ?? 0
      if sequence < prunedThrough {
        throw StoreError(
          .outOfRange,
          "changes after \(sequence) are no longer kept (the change log was pruned through "
            + "\(prunedThrough))"
        )
      }
      if sequence > (try Self.lastSequence(db)) {
        throw StoreError(
          .outOfRange,
          "\(sequence) is past the end of the change log"
        )
      }
      let statement = try db.cachedStatement(
        sql: """
          SELECT seq, entity, guid, kind, fields, author, time, on_behalf_of FROM change_log
          WHERE seq > ? ORDER BY seq LIMIT ?
          """
      )
      return try Row.fetchAll(statement, arguments: [sequence, limit]).map { row in
        let fields: String = row[4]
        return Change(
          sequence: row[0],
          entity: Change.Entity(rawValue: row[1]) ?? .employee,
          guid: row[2],
          kind: Change.Kind(rawValue: row[3]) ?? .updated,
          fields: fields.isEmpty ? [] : fields.split(separator: ",").map(String.init),
          author: row[5],
          onBehalfOf: row[7],
          timeMillis: row[6]
        )
      }
    }
  }

  /// Returns once a change after `sequence` is committed, with the newest sequence number.
  ///
  /// Costs no database work while waiting, and never delays a writer.
  /// - Throws: `CancellationError`, or `StoreError.unavailable` after `closeChangeFeed()`.
  public func waitForChanges(after sequence: Int64) async throws -> Int64 {
    try await self.feed.wait(after: sequence)
  }

  /// Ends every wait for changes, now and later: part of a graceful shutdown.
  public func closeChangeFeed() {
    self.feed.close()
  }

  /// Deletes changes beyond the retention policy, in bounded chunks through the writer.
  ///
  /// - Returns: how many changes were deleted.
  @discardableResult
  public func pruneChangeLog(
    retention: ChangeLogRetention? = nil,
    nowMillis: Int64? = nil
  ) async throws -> Int {
    let retention = retention ?? self.configuration.changeLogRetention
    let cutoffMillis =
      (nowMillis ?? Self.nowMillis()) - retention.maximumAge.components.seconds * 1000
    let keepRows = Int64(max(0, retention.maximumRows))
    var total = 0
    while true {
      let deleted = try await self.submit(bulk: true) { db -> Int? in
        let last = try Self.lastSequence(db)
        let byAge =
          try Int64.fetchOne(
            db,
            sql: "SELECT seq FROM change_log WHERE time < ? ORDER BY time DESC LIMIT 1",
            arguments: [cutoffMillis]
          ) ?? 0
        let through = max(byAge, last - keepRows)
        let prunedThrough =
          try Int64.fetchOne(db, sql: "SELECT pruned_through FROM change_log_state") ?? 0
        guard through > prunedThrough else { return nil }
        let chunkEnd = min(through, prunedThrough + 10_000)
        try db.execute(sql: "DELETE FROM change_log WHERE seq <= ?", arguments: [chunkEnd])
        let count = db.changesCount
        try db.execute(
          sql: "UPDATE change_log_state SET pruned_through = ?",
          arguments: [chunkEnd]
        )
        return count
      }
      guard let deleted else { return total }
      total += deleted
    }
  }
}
