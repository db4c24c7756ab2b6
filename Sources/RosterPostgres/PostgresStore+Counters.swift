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
    else { throw StoreError(.notFound, "no department \(ClientText.quoted(department))") }
    return try Self.departmentCounts(row)
  }

  /// Folds every counters table's deltas (`DeltaCounters.all`) into one row per key.
  func compactCounters(_ rewrite: CountersRewrite = .afterManyDeltas) async throws {
    for counters in DeltaCounters.all {
      try await self.compactDeltas(counters, rewrite: rewrite)
    }
  }

  /// Replaces the delta rows of a counters table by what its `fold` makes of them (`gone`), under an
  /// advisory lock of the schema's (as `Migrator`'s) so that one replica at a time does it;
  /// deltas written meanwhile stay as they are. After folding many rows (a bulk load leaves
  /// one per employee), the table is rewritten compact (`rewrite`): reads scan it.
  ///
  /// Only the keys with more than one row are folded: a key already down to one row stays
  /// as it is, so a quiet store's maintenance rewrites nothing (rewriting every name each
  /// cycle left the table bloated and never all-visible, which name searches scan).
  private func compactDeltas(_ counters: DeltaCounters, rewrite: CountersRewrite) async throws {
    let (table, key) = (counters.table, counters.key)
    let folded = try await self.transaction { transaction -> Int64 in
      guard
        try await transaction.row(
          "SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema(), \(counters.lock)))"
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
            ), kept AS (\(counters.fold) RETURNING 1) SELECT count(*) FROM gone
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
    try await self.withSetting("lock_timeout", "\(Int(lockWait / .milliseconds(1)))") {
      connection in
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

/// A table of counters kept as signed delta rows by triggers, and how its deltas fold.
struct DeltaCounters {
  let table: String
  let key: String
  /// The advisory lock (with the schema) that one replica at a time folds under.
  let lock: Int64
  /// The rows that replace the deltas, from the deleted ones (`gone`).
  let fold: String

  /// Employees, active employees and vacation days per department.
  static let departments = DeltaCounters(
    table: "department_counts",
    key: "department",
    lock: Migrator.lockKey + 1,
    fold: """
      INSERT INTO department_counts (department, headcount, active_count, vacation_days_total)
      SELECT department, sum(headcount), sum(active_count), sum(vacation_days_total) FROM gone
      GROUP BY department
      HAVING sum(headcount) <> 0 OR sum(active_count) <> 0 OR sum(vacation_days_total) <> 0
      """
  )

  /// Employees and active employees per folded name.
  static let names = DeltaCounters(
    table: "name_counts",
    key: "name_folded",
    lock: Migrator.lockKey + 2,
    fold: """
      INSERT INTO name_counts (name_folded, employees, active)
      SELECT name_folded, sum(employees), sum(active) FROM gone GROUP BY name_folded
      HAVING sum(employees) <> 0
      """
  )

  static let all = [departments, names]
}
