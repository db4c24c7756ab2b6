internal import GRDB
internal import RosterDomain

extension SQLiteStore {
  // MARK: Bulk load

  /// Runs `body`, a bulk load, with the secondary indexes and search triggers of `employees`
  /// dropped, then builds them again in one pass, which sorts instead of inserting row by row.
  ///
  /// Only when the table starts empty; otherwise `body` runs as is. Meant for offline loads
  /// (`roster import`, first-start seeding), never while the server answers reads: for the
  /// duration of `body`, filters and search have no index. The dropped DDL is journaled in
  /// the same transaction as the drop, so if the process dies mid-load, the next open of the
  /// store rebuilds it.
  ///
  /// - Throws: the error of `body`, or of the rebuild.
  public func withBulkLoad<T>(_ body: () async throws -> T) async throws -> T {
    guard try self.beginBulkLoad() else { return try await body() }
    let result: T
    do {
      result = try await body()
    } catch {
      try self.finishBulkLoad()
      throw error
    }
    try self.finishBulkLoad()
    return result
  }

  /// Drops the secondary indexes and triggers of an empty `employees` table, journaling
  /// their DDL. Returns false, dropping nothing, when the table has rows.
  func beginBulkLoad() throws -> Bool {
    try self.write { db in
      let empty =
        try Int.fetchOne(
          db,
          sql: "SELECT count(*) FROM (SELECT 1 FROM employees LIMIT 1)"
        ) == 0
      guard empty else { return false }
      let rows = try Row.fetchAll(
        db,
        sql: """
          SELECT type, name, sql FROM sqlite_master
          WHERE tbl_name = 'employees' AND type IN ('index', 'trigger') AND sql IS NOT NULL
          """
      )
      for row in rows {
        try db.execute(
          sql: "INSERT INTO bulk_load_pending (sql) VALUES (?)",
          arguments: [row["sql"] as String]
        )
        try db.execute(sql: "DROP \(row["type"] as String) \(row["name"] as String)")
      }
      return true
    }
  }

  /// Recreates whatever a bulk load dropped and rebuilds the names and counters, in one
  /// transaction that also clears the journal. Does nothing when the journal is empty.
  func finishBulkLoad() throws {
    try self.write { db in
      let pending = try String.fetchAll(db, sql: "SELECT sql FROM bulk_load_pending ORDER BY rowid")
      guard !pending.isEmpty else { return }
      for sql in pending { try db.execute(sql: sql) }
      // The counter triggers were dropped with the rest: count once, as they would have. The
      // names' own triggers were not, and index each new name.
      try db.execute(
        sql: """
          DELETE FROM employee_names;
          INSERT INTO employee_names (name_folded, employees, active)
            SELECT name_folded, count(*), sum(active != 0) FROM employees GROUP BY name_folded;
          DELETE FROM department_stats;
          INSERT INTO department_stats
            SELECT department, count(*), sum(active), sum(vacation_days) FROM employees
            GROUP BY department;
          """
      )
      try db.execute(sql: "DELETE FROM bulk_load_pending")
    }
  }
}
