internal import RosterDomain

extension PostgresSchema {
  /// What SQLite keeps for aggregates over any date range (its v8 and v9), kept by the same
  /// triggers as the other rollups:
  /// - `sales_daily_department`: each day's sales per department with count, total, sum of
  ///   squares, smallest and largest, so every function but the median reads a few rows per
  ///   day instead of every sale;
  /// - `sales_amount_buckets`: sales per year (`Y2024`) and month (`M2024-03`), department
  ///   and amount bucket (`AmountBuckets`), so a median adds up bucket counts and reads one
  ///   bucket's amounts, through `sales_by_amount`; `sales_by_date` also carries the employee,
  ///   so a department's days are read from the index alone (once vacuumed).
  ///
  /// Both are upserted rows, like `sales_monthly_department`. The functions the triggers
  /// call are replaced whole (a shipped migration is never edited).
  static let statistics: [String] = [
    """
    CREATE TABLE sales_daily_department (
      day         TEXT COLLATE "C" NOT NULL,
      department  TEXT COLLATE "C" NOT NULL,
      count       BIGINT  NOT NULL,
      total_cents BIGINT  NOT NULL,
      squares     NUMERIC NOT NULL,
      min_cents   BIGINT  NOT NULL,
      max_cents   BIGINT  NOT NULL,
      PRIMARY KEY (day, department)
    )
    """,
    """
    INSERT INTO sales_daily_department
    SELECT s.date, e.department, count(*), sum(s.amount_cents), sum(s.amount_cents::numeric * s.amount_cents),
           min(s.amount_cents), max(s.amount_cents)
    FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2
    """,
    """
    CREATE TABLE sales_amount_buckets (
      period     TEXT COLLATE "C" NOT NULL,
      department TEXT COLLATE "C" NOT NULL,
      bucket     INTEGER NOT NULL,
      count      BIGINT  NOT NULL,
      PRIMARY KEY (period, department, bucket)
    )
    """,
    """
    INSERT INTO sales_amount_buckets
    SELECT p.period, e.department, \(AmountBuckets.sql("s.amount_cents")), count(*)
    FROM sales s JOIN employees e ON e.id = s.employee_id, \(Self.periods("s.date"))
    GROUP BY 1, 2, 3
    """,
    "CREATE INDEX sales_by_amount ON sales (amount_cents) INCLUDE (date, employee_id)",
    // A range of days in a department, and its medians, from the index alone.
    "DROP INDEX sales_by_date",
    "CREATE INDEX sales_by_date ON sales (date) INCLUDE (amount_cents, employee_id)",
    """
    CREATE OR REPLACE FUNCTION sales_settle_employee() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      \(Self.takeOutMonthly(id: "OLD.id"))
      \(Self.takeOut(id: "OLD.id"))
      DELETE FROM sales_daily WHERE employee_id = OLD.id;
      RETURN OLD;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION sales_move_department() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      \(Self.takeOutMonthly(id: "NEW.id"))
      INSERT INTO sales_monthly_department AS m (department, month, count, total_cents)
        SELECT NEW.department, left(day, 7), sum(count), sum(total_cents)
        FROM sales_daily WHERE employee_id = NEW.id GROUP BY 2
      ON CONFLICT (department, month) DO UPDATE SET
        count = m.count + EXCLUDED.count,
        total_cents = m.total_cents + EXCLUDED.total_cents;
      \(Self.takeOut(id: "NEW.id"))
      INSERT INTO sales_daily_department AS x
        SELECT date, NEW.department, count(*), sum(amount_cents), sum(amount_cents::numeric * amount_cents),
               min(amount_cents), max(amount_cents)
        FROM sales WHERE employee_id = NEW.id GROUP BY 1
      ON CONFLICT (day, department) DO UPDATE SET
        count = x.count + EXCLUDED.count, total_cents = x.total_cents + EXCLUDED.total_cents,
        squares = x.squares + EXCLUDED.squares,
        min_cents = least(x.min_cents, EXCLUDED.min_cents), max_cents = greatest(x.max_cents, EXCLUDED.max_cents);
      INSERT INTO sales_amount_buckets AS x
        SELECT p.period, NEW.department, \(AmountBuckets.sql("s.amount_cents")), count(*)
        FROM sales s, \(Self.periods("s.date")) WHERE s.employee_id = NEW.id GROUP BY 1, 3
      ON CONFLICT (period, department, bucket) DO UPDATE SET count = x.count + EXCLUDED.count;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION sales_track() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      owner_department TEXT;
    BEGIN
      IF TG_OP = 'INSERT' THEN
        UPDATE employees SET
          sales_count = sales_count + 1,
          sales_total_cents = sales_total_cents + NEW.amount_cents
        WHERE id = NEW.employee_id
        RETURNING department INTO owner_department;
        INSERT INTO sales_daily AS d VALUES (NEW.employee_id, NEW.date, 1, NEW.amount_cents)
        ON CONFLICT (employee_id, day) DO UPDATE SET
          count = d.count + 1, total_cents = d.total_cents + EXCLUDED.total_cents;
        INSERT INTO sales_monthly_department AS m
          VALUES (owner_department, left(NEW.date, 7), 1, NEW.amount_cents)
        ON CONFLICT (department, month) DO UPDATE SET
          count = m.count + 1, total_cents = m.total_cents + EXCLUDED.total_cents;
        INSERT INTO sales_monthly AS m VALUES (left(NEW.date, 7), 1, NEW.amount_cents)
        ON CONFLICT (month) DO UPDATE SET
          count = m.count + 1, total_cents = m.total_cents + EXCLUDED.total_cents;
        INSERT INTO sales_daily_department AS x
          VALUES (NEW.date, owner_department, 1, NEW.amount_cents, NEW.amount_cents::numeric * NEW.amount_cents,
                  NEW.amount_cents, NEW.amount_cents)
        ON CONFLICT (day, department) DO UPDATE SET
          count = x.count + 1, total_cents = x.total_cents + EXCLUDED.total_cents,
          squares = x.squares + EXCLUDED.squares,
          min_cents = least(x.min_cents, EXCLUDED.min_cents), max_cents = greatest(x.max_cents, EXCLUDED.max_cents);
        INSERT INTO sales_amount_buckets AS x
          VALUES ('Y' || left(NEW.date, 4), owner_department, \(AmountBuckets.sql("NEW.amount_cents")), 1),
                 ('M' || left(NEW.date, 7), owner_department, \(AmountBuckets.sql("NEW.amount_cents")), 1)
        ON CONFLICT (period, department, bucket) DO UPDATE SET count = x.count + 1;
        RETURN NULL;
      END IF;
      -- A sale deleted on its own; when its employee is being deleted, the employee is gone
      -- already and their rollups were settled (sales_settle_employee).
      UPDATE employees SET
        sales_count = sales_count - 1,
        sales_total_cents = sales_total_cents - OLD.amount_cents
      WHERE id = OLD.employee_id
      RETURNING department INTO owner_department;
      IF FOUND THEN
        UPDATE sales_daily SET count = count - 1, total_cents = total_cents - OLD.amount_cents
        WHERE employee_id = OLD.employee_id AND day = OLD.date;
        DELETE FROM sales_daily WHERE employee_id = OLD.employee_id AND day = OLD.date AND count = 0;
        UPDATE sales_monthly_department SET
          count = count - 1, total_cents = total_cents - OLD.amount_cents
        WHERE department = owner_department AND month = left(OLD.date, 7);
        DELETE FROM sales_monthly_department
        WHERE department = owner_department AND month = left(OLD.date, 7) AND count = 0;
        UPDATE sales_daily_department SET
          count = count - 1, total_cents = total_cents - OLD.amount_cents,
          squares = squares - OLD.amount_cents::numeric * OLD.amount_cents
        WHERE day = OLD.date AND department = owner_department;
        DELETE FROM sales_daily_department WHERE day = OLD.date AND department = owner_department AND count = 0;
        -- A statement that deletes many sales has deleted them all before this runs: no sale
        -- left means the rest of the day's count goes too, so the row keeps its bounds.
        UPDATE sales_daily_department x SET min_cents = coalesce(r.lo, x.min_cents), max_cents = coalesce(r.hi, x.max_cents)
        FROM (SELECT min(s.amount_cents) AS lo, max(s.amount_cents) AS hi
              FROM sales s JOIN employees e ON e.id = s.employee_id
              WHERE s.date = OLD.date AND e.department = owner_department) r
        WHERE x.day = OLD.date AND x.department = owner_department
          AND (OLD.amount_cents <= x.min_cents OR OLD.amount_cents >= x.max_cents);
        UPDATE sales_amount_buckets SET count = count - 1
        WHERE period IN ('Y' || left(OLD.date, 4), 'M' || left(OLD.date, 7)) AND department = owner_department
          AND bucket = \(AmountBuckets.sql("OLD.amount_cents"));
        DELETE FROM sales_amount_buckets
        WHERE period IN ('Y' || left(OLD.date, 4), 'M' || left(OLD.date, 7)) AND department = owner_department
          AND bucket = \(AmountBuckets.sql("OLD.amount_cents")) AND count = 0;
      END IF;
      UPDATE sales_monthly SET count = count - 1, total_cents = total_cents - OLD.amount_cents
      WHERE month = left(OLD.date, 7);
      DELETE FROM sales_monthly WHERE month = left(OLD.date, 7) AND count = 0;
      RETURN NULL;
    END
    $$
    """,
  ]

  /// A sale's two periods, its year and its month, as `p(period)` to join after `sales s`.
  static func periods(_ date: String) -> String {
    "LATERAL (VALUES ('Y' || left(\(date), 4)), ('M' || left(\(date), 7))) p(period)"
  }

  /// Takes the monthly sales of employee `id` out of `OLD.department`, from their daily rollups
  /// (as migration 2's functions did).
  private static func takeOutMonthly(id: String) -> String {
    """
    UPDATE sales_monthly_department m SET
        count = m.count - d.count,
        total_cents = m.total_cents - d.total_cents
      FROM (SELECT left(day, 7) AS month, sum(count) AS count, sum(total_cents) AS total_cents
            FROM sales_daily WHERE employee_id = \(id) GROUP BY 1) d
      WHERE m.department = OLD.department AND m.month = d.month;
      DELETE FROM sales_monthly_department WHERE department = OLD.department AND count = 0;
    """
  }

  /// Takes the sales of employee `id` out of `OLD.department`'s daily statistics and amount
  /// buckets; the employee's row no longer counts in that department (deleted, or moved).
  private static func takeOut(id: String) -> String {
    """
    UPDATE sales_daily_department x SET
        count = x.count - d.count, total_cents = x.total_cents - d.total_cents, squares = x.squares - d.squares
      FROM (SELECT date AS day, count(*) AS count, sum(amount_cents) AS total_cents,
                   sum(amount_cents::numeric * amount_cents) AS squares
            FROM sales WHERE employee_id = \(id) GROUP BY 1) d
      WHERE x.department = OLD.department AND x.day = d.day;
      DELETE FROM sales_daily_department
      WHERE department = OLD.department AND count = 0 AND day IN (SELECT date FROM sales WHERE employee_id = \(id));
      UPDATE sales_daily_department x SET min_cents = r.lo, max_cents = r.hi
      FROM (SELECT s.date AS day, min(s.amount_cents) AS lo, max(s.amount_cents) AS hi
            FROM sales s JOIN employees e ON e.id = s.employee_id
            WHERE e.department = OLD.department AND s.employee_id <> \(id)
              AND s.date IN (SELECT date FROM sales WHERE employee_id = \(id))
            GROUP BY 1) r
      WHERE x.department = OLD.department AND x.day = r.day;
      UPDATE sales_amount_buckets x SET count = x.count - d.count
      FROM (SELECT p.period, \(AmountBuckets.sql("s.amount_cents")) AS bucket, count(*) AS count
            FROM sales s, \(Self.periods("s.date")) WHERE s.employee_id = \(id) GROUP BY 1, 2) d
      WHERE x.period = d.period AND x.department = OLD.department AND x.bucket = d.bucket;
      DELETE FROM sales_amount_buckets
      WHERE department = OLD.department AND count = 0
        AND period IN (SELECT p.period FROM sales s, \(Self.periods("s.date")) WHERE s.employee_id = \(id));
    """
  }
}
