internal import GRDB
internal import RosterDomain

extension SQLiteStore {
  // MARK: Bulk load

  /// Runs `body`, a bulk load, with the secondary indexes and triggers of the tables it fills
  /// dropped (`employees`, and `sales` when it starts empty too), then counts the counters and
  /// rollups those triggers keep and builds the indexes again, once each, in one pass that
  /// sorts instead of inserting row by row.
  ///
  /// Its writes log no change each: the end logs the load as one gap (`logGap`).
  ///
  /// Only when `employees` starts empty; otherwise `body` runs as is. Meant for offline loads
  /// (`roster import`, `roster copy`, first-start seeding), never while the server answers
  /// reads: for the duration of `body`, filters and search have no index. The dropped DDL is
  /// journaled in the same transaction as the drop, so if the process dies mid-load, the next
  /// open of the store rebuilds it.
  ///
  /// - Throws: the error of `body`, or of the rebuild.
  public func withBulkLoad<T>(_ body: () async throws -> T) async throws -> T {
    guard try self.beginBulkLoad() else { return try await body() }
    let result: T
    do {
      result = try await self.feed.withoutLoggingEachWrite(body)
    } catch {
      try self.finishBulkLoad()
      throw error
    }
    try self.finishBulkLoad()
    return result
  }

  /// Drops the secondary indexes and triggers of an empty `employees` table, and of `sales`
  /// when it is empty too, journaling their DDL. Returns false, dropping nothing, when
  /// `employees` has rows.
  func beginBulkLoad() throws -> Bool {
    try self.write { db in
      func isEmpty(_ table: String) throws -> Bool {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM (SELECT 1 FROM \(table) LIMIT 1)") == 0
      }
      guard try isEmpty("employees") else { return false }
      let tables = try isEmpty("sales") ? "'employees', 'sales'" : "'employees'"
      let rows = try Row.fetchAll(
        db,
        sql: """
          SELECT type, name, sql FROM sqlite_master
          WHERE tbl_name IN (\(tables)) AND type IN ('index', 'trigger') AND sql IS NOT NULL
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

  /// Counts what the dropped triggers keep, then recreates whatever a bulk load dropped, and
  /// logs the load as a gap, in one transaction that also clears the journal. Does nothing
  /// when the journal is empty.
  func finishBulkLoad() throws {
    let last = try self.write { db -> Int64? in
      let pending = try String.fetchAll(db, sql: "SELECT sql FROM bulk_load_pending ORDER BY rowid")
      guard !pending.isEmpty else { return nil }
      // Counted before the indexes are back, so no index is updated row by row. The names'
      // own triggers (on employee_names) stay and index each new name.
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
      let salesBare =
        try Int.fetchOne(
          db,
          sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'sales'"
        ) == 0
      if salesBare { try Self.recountSales(db) }
      for sql in pending { try db.execute(sql: sql) }
      try db.execute(sql: "DELETE FROM bulk_load_pending")
      return try Self.logGap(db)
    }
    if let last { self.feed.publish(last) }
  }

  /// Logs a bulk load as one gap, when it loaded anything: the log's next number is taken and
  /// the log reads as pruned through it (`change_log_state`). A watcher whose token is from
  /// before the load gets `outOfRange` and lists again, as after pruning; one that starts from
  /// now follows what comes after: a row per record loaded would be a history of millions of
  /// inserts, costly to write and of no use to follow (docs/performance.md, "Moving a
  /// directory between backends"). Returns the log's new last number.
  static func logGap(_ db: Database) throws -> Int64? {
    guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM employees)") == true else {
      return nil
    }
    let gap = try Self.lastSequence(db) + 1
    // sqlite_sequence holds AUTOINCREMENT's last number, which the next insert goes past.
    try db.execute(sql: "DELETE FROM sqlite_sequence WHERE name = 'change_log'")
    for sql in [
      "INSERT INTO sqlite_sequence (name, seq) VALUES ('change_log', ?)",
      "DELETE FROM change_log WHERE seq <= ?",
      "UPDATE change_log_state SET pruned_through = ?",
    ] {
      try db.execute(sql: sql, arguments: [gap])
    }
    return gap
  }

  /// The sales' counters and rollups, counted from the rows, as the sales' triggers would
  /// have kept them from empty: the recounts `roster check` compares with
  /// (`SQLiteMaintenance.recounts`), and each month's version moved on by its sales.
  static func recountSales(_ db: Database) throws {
    try db.execute(
      sql: """
        UPDATE employees SET sales_count = s.count, sales_total_cents = s.total
        FROM (SELECT employee_id, count(*) AS count, sum(amount_cents) AS total FROM sales GROUP BY 1) s
        WHERE employees.id = s.employee_id;
        INSERT INTO sales_monthly (month, version, count, total_cents)
          SELECT substr(date, 1, 7), count(*), count(*), sum(amount_cents) FROM sales WHERE true GROUP BY 1
          ON CONFLICT (month) DO UPDATE SET
            version = version + excluded.version,
            count = excluded.count,
            total_cents = excluded.total_cents;
        """
    )
    let rebuilt = [
      "sales_daily", "sales_monthly_department", "sales_daily_department", "sales_amount_buckets",
    ]
    for pair in SQLiteMaintenance.recounts where rebuilt.contains(pair.name) {
      try db.execute(sql: "DELETE FROM \(pair.table)")
      try db.execute(sql: "INSERT INTO \(pair.table) (\(pair.columns)) \(pair.recount)")
    }
  }
}
