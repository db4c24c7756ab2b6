internal import PostgresNIO
public import RosterDomain

/// The counters kept as delta rows by the triggers (employees per department, per name):
/// read, and folded by the maintenance.
extension PostgresStore {
  /// Every department with its counters, sorted by department: the counters the writes keep.
  public func departmentCounts() async throws -> [DepartmentCounts] {
    try await self.rows(
      "SELECT department, headcount, active_count, vacation_days_total FROM department_stats ORDER BY department"
    ).map(Self.departmentCounts)
  }

  /// One department's counters. Throws `notFound` for a department with no employees.
  public func departmentCounts(_ department: String) async throws -> DepartmentCounts {
    guard
      let row = try await self.row(
        """
        SELECT department, headcount, active_count, vacation_days_total FROM department_stats
        WHERE department = \(department)
        """
      )
    else { throw StoreError(.notFound, "no department '\(department)'") }
    return try Self.departmentCounts(row)
  }

  /// Folds the department counters' deltas into one row per department.
  func compactDepartmentCounts(_ rewrite: CountersRewrite = .afterManyDeltas) async throws {
    try await self.compactDeltas(
      table: "department_counts",
      key: "department",
      lock: Migrator.lockKey + 1,
      rewrite: rewrite,
      fold: """
        INSERT INTO department_counts (department, headcount, active_count, vacation_days_total)
        SELECT department, sum(headcount), sum(active_count), sum(vacation_days_total) FROM gone
        GROUP BY department
        HAVING sum(headcount) <> 0 OR sum(active_count) <> 0 OR sum(vacation_days_total) <> 0
        """
    )
  }

  /// Folds the employees-per-name deltas into one row per name.
  func compactNameCounts(_ rewrite: CountersRewrite = .afterManyDeltas) async throws {
    try await self.compactDeltas(
      table: "name_counts",
      key: "name_folded",
      lock: Migrator.lockKey + 2,
      rewrite: rewrite,
      fold: """
        INSERT INTO name_counts (name_folded, employees, active)
        SELECT name_folded, sum(employees), sum(active) FROM gone GROUP BY name_folded
        HAVING sum(employees) <> 0
        """
    )
  }

  /// Replaces the delta rows of `table` by what `fold` makes of them (`gone`), under an
  /// advisory lock of the schema's (as `Migrator`'s) so that one replica at a time does it;
  /// deltas written meanwhile stay as they are. After folding many rows (a bulk load leaves
  /// one per employee), the table is rewritten compact (`rewrite`): reads scan it.
  ///
  /// Only the keys with more than one row are folded: a key already down to one row stays
  /// as it is, so a quiet store's maintenance rewrites nothing (rewriting every name each
  /// cycle left the table bloated and never all-visible, which name searches scan).
  private func compactDeltas(
    table: String,
    key: String,
    lock: Int64,
    rewrite: CountersRewrite,
    fold: String
  ) async throws {
    let folded = try await self.transaction { transaction -> Int64 in
      guard
        try await transaction.row(
          "SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema(), \(lock)))"
        )?[0].decode(Bool.self)
          == true
      else { return 0 }
      let row = try await transaction.row(
        PostgresQuery(
          unsafeSQL:
            """
            WITH gone AS (
              DELETE FROM \(table) WHERE \(key) IN (SELECT \(key) FROM \(table) GROUP BY 1 HAVING count(*) > 1)
              RETURNING *
            ), kept AS (\(fold) RETURNING 1) SELECT count(*) FROM gone
            """
        )
      )
      return try row?[0].decode(Int64.self) ?? 0
    }
    if rewrite == .always || folded > CountersRewrite.manyDeltas {
      try await self.rewrite(table, lockWait: rewrite.lockWait)
    }
  }

  /// Rewrites a counters table after a fold of many rows, compact (`VACUUM FULL`): a plain
  /// VACUUM leaves the table and its indexes as large as the deltas made them, and reads scan
  /// them whole (docs/performance.md, "Reads as a client sees them"). The rewrite's lock keeps
  /// the table's writers and readers out while it runs (a table of one row per key: moments),
  /// and while it waits for that lock, so it waits at most `lockWait`; a table busy for longer
  /// is only vacuumed, and stays as large until a later fold of many rows rewrites it.
  private func rewrite(_ table: String, lockWait: Duration) async throws {
    let milliseconds =
      lockWait.components.seconds * 1000
      + lockWait.components.attoseconds / 1_000_000_000_000_000
    try await self.withSetting("lock_timeout", "\(milliseconds)") { connection in
      do {
        _ = try await connection.query(
          PostgresQuery(unsafeSQL: "VACUUM (FULL, ANALYZE) \(table)"),
          logger: self.logger
        )
      } catch  where Self.sqlState(error) == "55P03" {
        self.logger.info(
          "a counters table was busy; vacuumed, not rewritten",
          metadata: ["table": "\(table)"]
        )
        _ = try await connection.query(
          PostgresQuery(unsafeSQL: "VACUUM (ANALYZE) \(table)"),
          logger: self.logger
        )
      }
    }
  }

  private static func departmentCounts(_ row: PostgresRandomAccessRow) throws -> DepartmentCounts {
    DepartmentCounts(
      department: try row[0].decode(String.self),
      headcount: try row[1].decode(Int64.self),
      active: try row[2].decode(Int64.self),
      vacationDaysTotal: try row[3].decode(Int64.self)
    )
  }
}

/// When a fold of the counters' deltas rewrites its table compact (`rewrite`), and how long
/// the rewrite waits for its lock.
enum CountersRewrite {
  /// The maintenance's: after folding many deltas (`manyDeltas`), waiting briefly, so the
  /// table's writers never wait behind it longer.
  case afterManyDeltas
  /// At the end of a bulk load, whatever this fold found (the maintenance may have folded
  /// part of the load's deltas already), waiting 5 s: past PostgreSQL's `deadlock_timeout`
  /// (1 s by default), an autovacuum of the table that holds the lock is cancelled for it,
  /// and the load's deltas call autovacuum to the table as the load ends.
  case always

  /// More deltas than this in one fold leave the table worth rewriting.
  static let manyDeltas: Int64 = 10_000

  var lockWait: Duration {
    switch self {
    case .afterManyDeltas: .milliseconds(200)
    case .always: .seconds(5)
    }
  }
}
