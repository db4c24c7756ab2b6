internal import Logging
internal import PostgresNIO
internal import RosterDomain

/// An offline load into empty tables at the speed of the engine: what is derived from the rows
/// is taken away before they arrive and built once after, from all of them.
///
/// - `begin`, when `employees` and `sales` are both empty, drops their secondary indexes, the
///   foreign key from `sales` and the keys of the sales rollups, and disables the triggers that
///   keep the counters and rollups. Each is journaled in `bulk_load_pending` with the statement
///   that puts it back, in the same transaction.
/// - The rows then go in through the store's usual writes, which find only the primary keys
///   and `employees.guid` to maintain, and log no change each.
/// - `finish` recounts every counter and rollup with one statement each, logs the load as
///   one gap in the change log (`logGap`), then runs the journal's statements (index builds
///   sort once instead of inserting row by row), and clears it. It works in two lanes, the
///   employees' and the sales', each in a transaction of its own, which the store runs at once
///   on two connections so that both cores work; interrupted, a lane leaves its part of the
///   journal whole.
///
/// A journal left by a load that stopped is finished by the next load or the next start
/// (`Migrator`). The load holds an advisory lock of the schema's meanwhile, so a replica
/// starting then does not finish it under the load's feet.
enum BulkLoad {
  /// The advisory lock a bulk load holds for its duration ("RosterBulk" in ASCII, with the
  /// schema's name).
  static let lockKey: Int64 = 0x526F_7374_6572_42

  static let lock: PostgresQuery =
    "SELECT pg_advisory_lock(hashtextextended(current_schema(), \(Self.lockKey)))"
  static let tryLock: PostgresQuery =
    "SELECT pg_try_advisory_lock(hashtextextended(current_schema(), \(Self.lockKey)))"
  static let unlock: PostgresQuery =
    "SELECT pg_advisory_unlock(hashtextextended(current_schema(), \(Self.lockKey)))"

  /// The tables whose rows a bulk load writes.
  static let loaded = "'employees'::regclass, 'sales'::regclass"
  /// The rollups a bulk load rebuilds whole: nothing else writes them while the triggers are
  /// off, so their keys go too (`sales_daily` has about a row per sale).
  static let rollups =
    "'sales_daily'::regclass, 'sales_daily_department'::regclass, "
    + "'sales_monthly_department'::regclass, 'sales_monthly'::regclass, 'sales_amount_buckets'::regclass"

  /// The halves of the rebuild, independent but for the foreign key from `sales`, which the
  /// sales' lane adds after its indexes and keys (it waits there for the employees' lane to
  /// commit).
  enum Lane: String, CaseIterable, Sendable {
    /// The employees' indexes and triggers, their sales counters, the name and department
    /// counts.
    case employees
    /// The sales' indexes, foreign key and trigger, and the sales rollups.
    case sales
  }

  /// What `begin` takes away: each row its lane, the statement that drops a thing and the one
  /// that puts it back.
  static let derived: PostgresQuery = PostgresQuery(
    unsafeSQL: """
      SELECT CASE WHEN i.indrelid = 'employees'::regclass THEN 'employees' ELSE 'sales' END,
             format('DROP INDEX %s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid)
      FROM pg_index i
      WHERE i.indrelid IN (\(loaded))
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
      UNION ALL
      SELECT 'sales', format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname),
             format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass, c.conname,
                    pg_get_constraintdef(c.oid))
      FROM pg_constraint c
      WHERE (c.conrelid IN (\(rollups)) AND c.contype IN ('p', 'u'))
         OR (c.conrelid = 'sales'::regclass AND c.contype = 'f')
      UNION ALL
      SELECT CASE WHEN t.tgrelid = 'employees'::regclass THEN 'employees' ELSE 'sales' END,
             format('ALTER TABLE %s DISABLE TRIGGER %I', t.tgrelid::regclass, t.tgname),
             format('ALTER TABLE %s ENABLE TRIGGER %I', t.tgrelid::regclass, t.tgname)
      FROM pg_trigger t
      WHERE t.tgrelid IN (\(loaded)) AND NOT t.tgisinternal AND t.tgenabled <> 'D'
      """
  )

  /// The load logged as one gap, when it loaded anything: the log's next number is taken and
  /// the log reads as pruned through it (`StoreBackend.withBulkLoad`; SQLite's `logGap`).
  static let logGap: PostgresQuery = """
    WITH gap AS (
      UPDATE change_log_state SET last_seq = last_seq + 1, pruned_through = last_seq + 1
      WHERE id = 1 AND EXISTS (SELECT 1 FROM employees)
      RETURNING last_seq
    )
    DELETE FROM change_log WHERE seq <= (SELECT last_seq FROM gap)
    """

  /// Every counter and rollup a lane's triggers keep, counted again from the rows, in order
  /// (the monthly rollups add up the daily ones). The employees' sales counters are written
  /// while their table has no secondary index to update, and only where they change.
  static func recount(_ lane: Lane) -> [PostgresQuery] {
    switch lane {
    case .employees:
      return [
        """
        UPDATE employees e SET sales_count = c.count, sales_total_cents = c.total
        FROM (
          SELECT e2.id, coalesce(s.count, 0) AS count, coalesce(s.total, 0) AS total
          FROM employees e2 LEFT JOIN (
            SELECT employee_id, count(*) AS count, sum(amount_cents) AS total FROM sales GROUP BY 1
          ) s ON s.employee_id = e2.id
        ) c
        WHERE e.id = c.id AND (e.sales_count, e.sales_total_cents) IS DISTINCT FROM (c.count, c.total)
        """,
        "TRUNCATE name_counts, department_counts",
        """
        INSERT INTO name_counts (name_folded, employees, active)
        SELECT name_folded, count(*), count(*) FILTER (WHERE active) FROM employees GROUP BY 1
        """,
        """
        INSERT INTO department_counts (department, headcount, active_count, vacation_days_total)
        SELECT department, count(*), count(*) FILTER (WHERE active), sum(vacation_days) FROM employees
        GROUP BY 1
        """,
        Self.logGap,
      ]
    case .sales:
      return [
        """
        TRUNCATE sales_daily, sales_daily_department, sales_monthly_department, sales_monthly,
          sales_amount_buckets
        """,
        """
        INSERT INTO sales_daily (employee_id, day, count, total_cents)
        SELECT employee_id, date, count(*), sum(amount_cents) FROM sales GROUP BY 1, 2
        """,
        """
        INSERT INTO sales_daily_department (day, department, count, total_cents, squares, min_cents, max_cents)
        SELECT s.date, e.department, count(*), sum(s.amount_cents), sum(s.amount_cents::numeric * s.amount_cents),
               min(s.amount_cents), max(s.amount_cents)
        FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2
        """,
        """
        INSERT INTO sales_monthly_department (department, month, count, total_cents)
        SELECT department, left(day, 7), sum(count), sum(total_cents) FROM sales_daily_department GROUP BY 1, 2
        """,
        """
        INSERT INTO sales_monthly (month, count, total_cents)
        SELECT left(day, 7), sum(count), sum(total_cents) FROM sales_daily_department GROUP BY 1
        """,
        PostgresQuery(
          unsafeSQL: """
            WITH monthly AS (
              SELECT left(s.date, 7) AS month, e.department, \(AmountBuckets.sql("s.amount_cents")) AS bucket,
                     count(*) AS count
              FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2, 3
            )
            INSERT INTO sales_amount_buckets (period, department, bucket, count)
            SELECT 'M' || month, department, bucket, count FROM monthly
            UNION ALL
            SELECT 'Y' || left(month, 4), department, bucket, sum(count) FROM monthly GROUP BY 1, 2, 3
            """
        ),
      ]
    }
  }

  /// Memory for the recount's grouping and the index builds, for this transaction only: the
  /// defaults (4 MB, 64 MB) spill 10M sales to disk several times over.
  static let settings: [PostgresQuery] = [
    "SET LOCAL work_mem = '256MB'",
    "SET LOCAL maintenance_work_mem = '256MB'",
  ]

  /// Takes away what the rows derive, journaling it, when `employees` and `sales` are empty.
  /// Returns whether the load runs bare: also when an unfinished journal is there already.
  static func begin(on connection: PostgresConnection, logger: Logger) async throws -> Bool {
    try await connection.transaction(logger: logger) {
      let empty =
        try await connection.rows(
          """
          SELECT NOT EXISTS (SELECT 1 FROM employees) AND NOT EXISTS (SELECT 1 FROM sales),
                 EXISTS (SELECT 1 FROM bulk_load_pending)
          """,
          logger: logger
        ).first
      guard let empty, try empty[0].decode(Bool.self) else { return false }
      if try empty[1].decode(Bool.self) { return true }
      for row in try await connection.rows(Self.derived, logger: logger) {
        let (lane, drop, restore) = try (
          row[0].decode(String.self), row[1].decode(String.self), row[2].decode(String.self)
        )
        _ = try await connection.rows(
          "INSERT INTO bulk_load_pending (lane, sql) VALUES (\(lane), \(restore))",
          logger: logger
        )
        _ = try await connection.rows(PostgresQuery(unsafeSQL: drop), logger: logger)
      }
      return true
    }
  }

  /// Recounts `lane`'s counters and rollups, puts back what `begin` took away in it and
  /// clears its part of the journal, in one transaction. Returns false, doing nothing, when
  /// that part is empty.
  @discardableResult
  static func finish(
    _ lane: Lane,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws -> Bool {
    let started = ContinuousClock.now
    let done = try await connection.transaction(logger: logger) {
      let pending = try await connection.rows(
        "SELECT sql FROM bulk_load_pending WHERE lane = \(lane.rawValue) ORDER BY step",
        logger: logger
      ).map { try $0[0].decode(String.self) }
      guard !pending.isEmpty else { return false }
      for statement in Self.settings + Self.recount(lane) {
        _ = try await connection.rows(statement, logger: logger)
      }
      for statement in pending {
        _ = try await connection.rows(PostgresQuery(unsafeSQL: statement), logger: logger)
      }
      _ = try await connection.rows(
        "DELETE FROM bulk_load_pending WHERE lane = \(lane.rawValue)",
        logger: logger
      )
      return true
    }
    if done {
      logger.info(
        "rebuilt what a bulk load derives",
        metadata: ["lane": "\(lane.rawValue)", "duration": "\(ContinuousClock.now - started)"]
      )
    }
    return done
  }
}
