internal import Foundation
internal import Logging
internal import PostgresNIO
public import RosterDomain

/// The change log's writes.
enum ChangeLog {
  /// Numbers and inserts a transaction's changes, last thing before it commits, and
  /// announces the new end of the log to every replica (delivered at commit).
  ///
  /// The numbers come from the single row of `change_log_state`: the UPDATE locks it until
  /// the transaction ends, so the next transaction to number its changes (on any replica)
  /// waits for this commit and starts after its last number. The log is therefore numbered in
  /// commit order, and a transaction that rolls back leaves no gap. The lock is held only
  /// from this statement to the commit.
  ///
  /// - Returns: the newest sequence number, or nil when there was nothing to record.
  static func append(
    _ changes: [Change],
    on transaction: WriteTransaction,
    channel: String
  ) async throws -> Int64? {
    guard !changes.isEmpty else { return nil }
    guard let row = try await transaction.row(ChangeLogAppend(changes: changes, channel: channel))
    else {
      throw StoreError(.unavailable, "the change log's state row is missing")
    }
    return try row[0].decode(Int64.self)
  }
}

/// One transaction's changes numbered and logged, and announced: one statement, prepared once
/// on each pooled connection (its arrays are parameters, so every batch shares its plan).
struct ChangeLogAppend: RowStatement {
  static let sql = """
    WITH counter AS (
      UPDATE change_log_state SET last_seq = last_seq + $1 WHERE id = 1
      RETURNING last_seq - $1 AS base
    ), logged AS (
      INSERT INTO change_log (seq, entity, guid, kind, fields, author, time, on_behalf_of)
      SELECT counter.base + c.ord, c.entity, c.guid, c.kind, c.fields, c.author, c.time, c.behalf
      FROM counter, unnest(
        $2::int4[], $3::text[], $4::int4[], $5::text[], $6::text[], $7::int8[], $9::text[]
      ) WITH ORDINALITY AS c(entity, guid, kind, fields, author, time, behalf, ord)
    )
    SELECT base + $1, pg_notify($8, (base + $1)::text) FROM counter
    """
  var changes: [Change]
  var channel: String

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 9)
    bindings.append(Int64(self.changes.count))
    bindings.append(self.changes.map { Int32($0.entity.rawValue) })
    bindings.append(self.changes.map(\.guid))
    bindings.append(self.changes.map { Int32($0.kind.rawValue) })
    bindings.append(self.changes.map { $0.fields.joined(separator: ",") })
    bindings.append(self.changes.map(\.author))
    bindings.append(self.changes.map(\.timeMillis))
    bindings.append(self.channel)
    bindings.append(self.changes.map(\.onBehalfOf))
    return bindings
  }
}

extension PostgresStore {
  // MARK: Change feed

  /// The newest sequence number this replica knows is committed: its own commits, and other
  /// replicas' as their notifications (or the poll) arrive.
  public var latestChange: Int64 {
    self.feed.latest
  }

  /// Up to `limit` changes strictly after `sequence`, oldest first.
  ///
  /// - Throws: `outOfRange` when changes after `sequence` were pruned, or `sequence` is past
  ///   the end of the log.
  public func changes(after sequence: Int64, limit: Int) async throws -> [Change] {
    precondition(limit > 0 && limit <= StoreLimits.maximumChangePage)
    // One statement, one snapshot: the state and the rows agree.
    let rows = try await self.rows(
      """
      SELECT s.pruned_through, s.last_seq, c.seq, c.entity, c.guid, c.kind, c.fields, c.author, c.time,
        c.on_behalf_of
      FROM change_log_state s
      LEFT JOIN LATERAL (
        SELECT * FROM change_log WHERE seq > \(sequence) ORDER BY seq LIMIT \(limit)
      ) c ON true
      """
    )
    guard let first = rows.first else { return [] }
    let prunedThrough = try first[0].decode(Int64.self)
    let last = try first[1].decode(Int64.self)
    if sequence < prunedThrough {
      throw StoreError(
        .outOfRange,
        "changes after \(sequence) are no longer kept (the change log was pruned through \(prunedThrough))"
      )
    }
    if sequence > last {
      throw StoreError(.outOfRange, "\(sequence) is past the end of the change log")
    }
    if last > self.feed.latest { self.feed.publish(last) }
    return try rows.compactMap { row -> Change? in
      guard let seq = try row[2].decode(Int64?.self) else { return nil }
      let fields = try row[6].decode(String.self)
      return Change(
        sequence: seq,
        entity: Change.Entity(rawValue: Int(try row[3].decode(Int16.self))) ?? .employee,
        guid: try row[4].decode(String.self),
        kind: Change.Kind(rawValue: Int(try row[5].decode(Int16.self))) ?? .updated,
        fields: fields.isEmpty ? [] : fields.split(separator: ",").map(String.init),
        author: try row[7].decode(String.self),
        onBehalfOf: try row[9].decode(String.self),
        timeMillis: try row[8].decode(Int64.self)
      )
    }
  }

  /// Returns once a change after `sequence` is committed (on any replica), with the newest
  /// sequence number.
  public func waitForChanges(after sequence: Int64) async throws -> Int64 {
    try await self.feed.wait(after: sequence)
  }

  /// Hears other replicas' commits: `LISTEN` on a connection of its own (not the pool's,
  /// which it would hold forever), and a read of the log's end every `feedPollInterval`,
  /// which also covers notifications lost while the connection was down. Reconnects until
  /// cancelled; cancellation closes the connection, which ends the wait for notifications.
  func listen() async throws {
    try await withThrowingDiscardingTaskGroup { group in
      group.addTask {
        while !Task.isCancelled {
          do {
            let connection = try await Migrator(
              configuration: self.configuration,
              logger: self.logger
            ).connect()
            do {
              try await withTaskCancellationHandler {
                try await connection.listen(on: self.channel) { notifications in
                  try await self.pollLatest()
                  for try await notification in notifications {
                    if let sequence = Int64(notification.payload) { self.feed.publish(sequence) }
                  }
                }
              } onCancel: {
                connection.close().whenComplete { _ in }
              }
            } catch {
              // Closed on every path: postgres-nio traps (in debug builds) on a connection
              // released open, as this one was when the listen failed.
              try? await connection.close()
              throw error
            }
            try? await connection.close()
          } catch {
            if Task.isCancelled { return }
            // The primary may be gone: calls fail at once until a host suits again.
            if Self.losesHost(error) { self.pool.suspect(because: error) }
            self.logger.warning(
              "change listener lost its connection; reconnecting",
              metadata: ["error": "\(String(reflecting: error))"]
            )
            try await Task.sleep(for: .milliseconds(500))
          }
        }
      }
      group.addTask {
        while !Task.isCancelled {
          try await Task.sleep(for: self.configuration.feedPollInterval)
          try? await self.pollLatest()
        }
      }
    }
  }

  /// Publishes the log's last number as the database has it.
  func pollLatest() async throws {
    if let row = try await self.row("SELECT last_seq FROM change_log_state") {
      self.feed.publish(try row[0].decode(Int64.self))
    }
  }

  /// Deletes changes beyond the retention policy, 10,000 per transaction. Each transaction
  /// reads only the next 10,000 by sequence number, so its cost does not grow with the log
  /// (asking the whole log for its newest change past the age limit read every older entry,
  /// once per batch).
  func pruneChangeLog() async throws {
    let cutoff = Self.nowMillis() - self.configuration.changeLogMaximumAge.components.seconds * 1000
    let keep = Int64(self.configuration.changeLogMaximumRows)
    while true {
      let deleted = try await self.transaction { transaction -> Int in
        guard
          let row = try await transaction.row(
            """
            SELECT s.pruned_through, greatest(
              coalesce((
                SELECT max(seq) FROM (
                  SELECT seq, time FROM change_log WHERE seq > s.pruned_through ORDER BY seq LIMIT 10000
                ) next WHERE time < \(cutoff)), 0),
              s.last_seq - \(keep))
            FROM change_log_state s
            """
          )
        else { return 0 }
        let prunedThrough = try row[0].decode(Int64.self)
        let through = try row[1].decode(Int64.self)
        guard through > prunedThrough else { return 0 }
        let end = min(through, prunedThrough + 10_000)
        try await transaction.execute(
          "DELETE FROM change_log WHERE seq > \(prunedThrough) AND seq <= \(end)"
        )
        try await transaction.execute("UPDATE change_log_state SET pruned_through = \(end)")
        return Int(end - prunedThrough)
      }
      if deleted == 0 { return }
    }
  }
}
