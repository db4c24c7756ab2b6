internal import RosterDomain

extension SQLiteStore {
  // MARK: Analytics schema

  // The migrations that create and evolve sales and their rollups (v5, v6, v8); the
  // migrator in SQLiteStore+Migrations.swift runs them in order.

  /// Sales, and the derived data every write keeps in step in its own transaction, by
  /// trigger: department counters, each employee's sales count and total, daily sales per
  /// employee, monthly sales per department, and a version per month for the calendar cache.
  static let analyticsSchema = """
    ALTER TABLE employees ADD COLUMN sales_total_cents INTEGER NOT NULL DEFAULT 0;

    -- Amounts are whole cents, so every counter and rollup adds up exactly.
    CREATE TABLE sales (
      id           INTEGER PRIMARY KEY,
      employee_id  INTEGER NOT NULL REFERENCES employees(id) ON DELETE CASCADE,
      amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
      date         TEXT    NOT NULL
    );
    CREATE INDEX sales_by_employee_date ON sales(employee_id, date);
    CREATE INDEX sales_by_date ON sales(date);

    CREATE TABLE department_stats (
      department          TEXT    NOT NULL PRIMARY KEY,
      headcount           INTEGER NOT NULL,
      active_count        INTEGER NOT NULL,
      vacation_days_total INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO department_stats
      SELECT department, count(*), sum(active), sum(vacation_days) FROM employees
      GROUP BY department;

    CREATE TABLE sales_daily (
      employee_id INTEGER NOT NULL,
      day         TEXT    NOT NULL,
      count       INTEGER NOT NULL,
      total_cents INTEGER NOT NULL,
      PRIMARY KEY (employee_id, day)
    ) WITHOUT ROWID;

    CREATE TABLE sales_monthly_department (
      department  TEXT    NOT NULL,
      month       TEXT    NOT NULL,
      count       INTEGER NOT NULL,
      total_cents INTEGER NOT NULL,
      PRIMARY KEY (department, month)
    ) WITHOUT ROWID;

    CREATE TABLE sales_month_versions (
      month   TEXT    NOT NULL PRIMARY KEY,
      version INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TRIGGER department_stats_insert AFTER INSERT ON employees BEGIN
      INSERT INTO department_stats (department, headcount, active_count, vacation_days_total)
        VALUES (new.department, 1, new.active, new.vacation_days)
        ON CONFLICT (department) DO UPDATE SET
          headcount = headcount + 1,
          active_count = active_count + excluded.active_count,
          vacation_days_total = vacation_days_total + excluded.vacation_days_total;
    END;
    CREATE TRIGGER department_stats_delete AFTER DELETE ON employees BEGIN
      UPDATE department_stats SET
        headcount = headcount - 1,
        active_count = active_count - old.active,
        vacation_days_total = vacation_days_total - old.vacation_days
        WHERE department = old.department;
      DELETE FROM department_stats WHERE department = old.department AND headcount = 0;
    END;
    CREATE TRIGGER department_stats_update AFTER UPDATE OF department, active, vacation_days
    ON employees BEGIN
      UPDATE department_stats SET
        headcount = headcount - 1,
        active_count = active_count - old.active,
        vacation_days_total = vacation_days_total - old.vacation_days
        WHERE department = old.department;
      INSERT INTO department_stats (department, headcount, active_count, vacation_days_total)
        VALUES (new.department, 1, new.active, new.vacation_days)
        ON CONFLICT (department) DO UPDATE SET
          headcount = headcount + 1,
          active_count = active_count + excluded.active_count,
          vacation_days_total = vacation_days_total + excluded.vacation_days_total;
      DELETE FROM department_stats WHERE department = old.department AND headcount = 0;
    END;

    -- A deleted employee takes their sales with them (cascade). Their rollups are settled
    -- here, before the row goes, while their department is still known.
    CREATE TRIGGER sales_rollups_employee_delete BEFORE DELETE ON employees BEGIN
      INSERT INTO sales_month_versions (month, version)
        SELECT DISTINCT substr(day, 1, 7), 1 FROM sales_daily WHERE employee_id = old.id
        ON CONFLICT (month) DO UPDATE SET version = version + 1;
      UPDATE sales_monthly_department SET
        count = sales_monthly_department.count - m.count,
        total_cents = sales_monthly_department.total_cents - m.total_cents
        FROM (SELECT substr(day, 1, 7) AS month, sum(count) AS count,
                     sum(total_cents) AS total_cents
              FROM sales_daily WHERE employee_id = old.id GROUP BY 1) AS m
        WHERE sales_monthly_department.department = old.department
          AND sales_monthly_department.month = m.month;
      DELETE FROM sales_monthly_department WHERE department = old.department AND count = 0;
      DELETE FROM sales_daily WHERE employee_id = old.id;
    END;
    -- A change of department moves the employee's monthly sales with them.
    CREATE TRIGGER sales_rollups_department_change AFTER UPDATE OF department ON employees
    WHEN old.department IS NOT new.department BEGIN
      INSERT INTO sales_month_versions (month, version)
        SELECT DISTINCT substr(day, 1, 7), 1 FROM sales_daily WHERE employee_id = new.id
        ON CONFLICT (month) DO UPDATE SET version = version + 1;
      UPDATE sales_monthly_department SET
        count = sales_monthly_department.count - m.count,
        total_cents = sales_monthly_department.total_cents - m.total_cents
        FROM (SELECT substr(day, 1, 7) AS month, sum(count) AS count,
                     sum(total_cents) AS total_cents
              FROM sales_daily WHERE employee_id = new.id GROUP BY 1) AS m
        WHERE sales_monthly_department.department = old.department
          AND sales_monthly_department.month = m.month;
      DELETE FROM sales_monthly_department WHERE department = old.department AND count = 0;
      INSERT INTO sales_monthly_department (department, month, count, total_cents)
        SELECT new.department, substr(day, 1, 7), sum(count), sum(total_cents)
        FROM sales_daily WHERE employee_id = new.id GROUP BY 2
        ON CONFLICT (department, month) DO UPDATE SET
          count = count + excluded.count,
          total_cents = total_cents + excluded.total_cents;
    END;

    CREATE TRIGGER sales_insert AFTER INSERT ON sales BEGIN
      UPDATE employees SET
        sales_count = sales_count + 1,
        sales_total_cents = sales_total_cents + new.amount_cents
        WHERE id = new.employee_id;
      INSERT INTO sales_daily (employee_id, day, count, total_cents)
        VALUES (new.employee_id, new.date, 1, new.amount_cents)
        ON CONFLICT (employee_id, day) DO UPDATE SET
          count = count + 1,
          total_cents = total_cents + excluded.total_cents;
      INSERT INTO sales_monthly_department (department, month, count, total_cents)
        SELECT department, substr(new.date, 1, 7), 1, new.amount_cents FROM employees
        WHERE id = new.employee_id
        ON CONFLICT (department, month) DO UPDATE SET
          count = count + 1,
          total_cents = total_cents + excluded.total_cents;
      INSERT INTO sales_month_versions (month, version) VALUES (substr(new.date, 1, 7), 1)
        ON CONFLICT (month) DO UPDATE SET version = version + 1;
    END;
    -- When the employee is being deleted, their rollups were settled before the row went,
    -- and these statements find nothing.
    CREATE TRIGGER sales_delete AFTER DELETE ON sales BEGIN
      UPDATE employees SET
        sales_count = sales_count - 1,
        sales_total_cents = sales_total_cents - old.amount_cents
        WHERE id = old.employee_id;
      UPDATE sales_daily SET count = count - 1, total_cents = total_cents - old.amount_cents
        WHERE employee_id = old.employee_id AND day = old.date;
      DELETE FROM sales_daily
        WHERE employee_id = old.employee_id AND day = old.date AND count = 0;
      UPDATE sales_monthly_department SET
        count = count - 1,
        total_cents = total_cents - old.amount_cents
        WHERE department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND month = substr(old.date, 1, 7);
      DELETE FROM sales_monthly_department
        WHERE department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND month = substr(old.date, 1, 7) AND count = 0;
      INSERT INTO sales_month_versions (month, version) VALUES (substr(old.date, 1, 7), 1)
        ON CONFLICT (month) DO UPDATE SET version = version + 1;
    END;
    """

  /// The month versions become `sales_monthly`, which also keeps each month's count and
  /// total over everyone, so the whole-company calendar reads one row per month instead of
  /// one per department and month. Only the sales triggers change it: a department change
  /// or a settled employee delete moves sales between departments, not in or out of a month,
  /// and a cascaded sale delete still fires `sales_delete`.
  static let monthlyTotalsSchema = """
    ALTER TABLE sales_month_versions RENAME TO sales_monthly;
    ALTER TABLE sales_monthly ADD COLUMN count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sales_monthly ADD COLUMN total_cents INTEGER NOT NULL DEFAULT 0;
    UPDATE sales_monthly SET count = m.count, total_cents = m.total_cents
      FROM (SELECT substr(date, 1, 7) AS month, count(*) AS count,
                   sum(amount_cents) AS total_cents
            FROM sales GROUP BY 1) AS m
      WHERE sales_monthly.month = m.month;

    DROP TRIGGER sales_insert;
    CREATE TRIGGER sales_insert AFTER INSERT ON sales BEGIN
      UPDATE employees SET
        sales_count = sales_count + 1,
        sales_total_cents = sales_total_cents + new.amount_cents
        WHERE id = new.employee_id;
      INSERT INTO sales_daily (employee_id, day, count, total_cents)
        VALUES (new.employee_id, new.date, 1, new.amount_cents)
        ON CONFLICT (employee_id, day) DO UPDATE SET
          count = count + 1,
          total_cents = total_cents + excluded.total_cents;
      INSERT INTO sales_monthly_department (department, month, count, total_cents)
        SELECT department, substr(new.date, 1, 7), 1, new.amount_cents FROM employees
        WHERE id = new.employee_id
        ON CONFLICT (department, month) DO UPDATE SET
          count = count + 1,
          total_cents = total_cents + excluded.total_cents;
      INSERT INTO sales_monthly (month, version, count, total_cents)
        VALUES (substr(new.date, 1, 7), 1, 1, new.amount_cents)
        ON CONFLICT (month) DO UPDATE SET
          version = version + 1,
          count = count + 1,
          total_cents = total_cents + excluded.total_cents;
    END;
    -- When the employee is being deleted, their daily and department rollups were settled
    -- before the row went, and those statements find nothing; the month totals still drop.
    DROP TRIGGER sales_delete;
    CREATE TRIGGER sales_delete AFTER DELETE ON sales BEGIN
      UPDATE employees SET
        sales_count = sales_count - 1,
        sales_total_cents = sales_total_cents - old.amount_cents
        WHERE id = old.employee_id;
      UPDATE sales_daily SET count = count - 1, total_cents = total_cents - old.amount_cents
        WHERE employee_id = old.employee_id AND day = old.date;
      DELETE FROM sales_daily
        WHERE employee_id = old.employee_id AND day = old.date AND count = 0;
      UPDATE sales_monthly_department SET
        count = count - 1,
        total_cents = total_cents - old.amount_cents
        WHERE department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND month = substr(old.date, 1, 7);
      DELETE FROM sales_monthly_department
        WHERE department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND month = substr(old.date, 1, 7) AND count = 0;
      UPDATE sales_monthly SET
        version = version + 1,
        count = count - 1,
        total_cents = total_cents - old.amount_cents
        WHERE month = substr(old.date, 1, 7);
    END;
    """

  /// Each day's sales per department, with what every aggregate but the median needs: count,
  /// total, sum of squares (for the standard deviation), smallest and largest. A grouped
  /// aggregate over any range of days then reads a few rows per day instead of every sale:
  /// 16,000 rows for 45 years of 15 departments, against 10M sales.
  ///
  /// Kept like the monthly rollups: by the sales triggers, with an employee's days settled
  /// before the employee goes (the cascaded sale deletes then find no department and change
  /// nothing), and moved when the employee changes department. The smallest and largest are
  /// recounted from that day's sales in the department when a sale that held one goes.
  ///
  /// The sales indexes also carry the amount, so a scan of a date range or of an employee's
  /// sales (the median, and groups by employee) reads no table row; and the amounts have
  /// an index of their own, whose middle entries are the median of every sale.
  static let dailyDepartmentSchema = """
    DROP INDEX sales_by_employee_date;
    CREATE INDEX sales_by_employee_date ON sales(employee_id, date, amount_cents);
    DROP INDEX sales_by_date;
    CREATE INDEX sales_by_date ON sales(date, amount_cents);
    -- The median of every sale is the middle entry of this one (about 0.1 s at 10M).
    CREATE INDEX sales_by_amount ON sales(amount_cents);

    CREATE TABLE sales_daily_department (
      day         TEXT    NOT NULL,
      department  TEXT    NOT NULL,
      count       INTEGER NOT NULL,
      total_cents INTEGER NOT NULL,
      squares     INTEGER NOT NULL,
      min_cents   INTEGER NOT NULL,
      max_cents   INTEGER NOT NULL,
      PRIMARY KEY (day, department)
    ) WITHOUT ROWID;
    INSERT INTO sales_daily_department
      SELECT s.date, e.department, count(*), sum(s.amount_cents),
             sum(s.amount_cents * s.amount_cents), min(s.amount_cents), max(s.amount_cents)
      FROM sales s JOIN employees e ON e.id = s.employee_id
      GROUP BY 1, 2;

    CREATE TRIGGER sales_daily_department_insert AFTER INSERT ON sales BEGIN
      INSERT INTO sales_daily_department
        (day, department, count, total_cents, squares, min_cents, max_cents)
        SELECT new.date, department, 1, new.amount_cents, new.amount_cents * new.amount_cents,
               new.amount_cents, new.amount_cents
        FROM employees WHERE id = new.employee_id
        ON CONFLICT (day, department) DO UPDATE SET
          count = count + 1,
          total_cents = total_cents + excluded.total_cents,
          squares = squares + excluded.squares,
          min_cents = min(min_cents, excluded.min_cents),
          max_cents = max(max_cents, excluded.max_cents);
    END;
    CREATE TRIGGER sales_daily_department_delete AFTER DELETE ON sales BEGIN
      UPDATE sales_daily_department SET
        count = count - 1,
        total_cents = total_cents - old.amount_cents,
        squares = squares - old.amount_cents * old.amount_cents
        WHERE day = old.date
          AND department = (SELECT department FROM employees WHERE id = old.employee_id);
      DELETE FROM sales_daily_department
        WHERE day = old.date
          AND department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND count = 0;
      UPDATE sales_daily_department SET
        min_cents = (SELECT min(s.amount_cents) FROM sales s JOIN employees e ON e.id = s.employee_id
                     WHERE s.date = old.date AND e.department = sales_daily_department.department),
        max_cents = (SELECT max(s.amount_cents) FROM sales s JOIN employees e ON e.id = s.employee_id
                     WHERE s.date = old.date AND e.department = sales_daily_department.department)
        WHERE day = old.date
          AND department = (SELECT department FROM employees WHERE id = old.employee_id)
          AND (old.amount_cents <= min_cents OR old.amount_cents >= max_cents);
    END;
    CREATE TRIGGER sales_daily_department_employee_delete BEFORE DELETE ON employees BEGIN
      UPDATE sales_daily_department SET
        count = sales_daily_department.count - d.count,
        total_cents = sales_daily_department.total_cents - d.total_cents,
        squares = sales_daily_department.squares - d.squares
        FROM (SELECT date AS day, count(*) AS count, sum(amount_cents) AS total_cents,
                     sum(amount_cents * amount_cents) AS squares
              FROM sales WHERE employee_id = old.id GROUP BY date) AS d
        WHERE sales_daily_department.department = old.department
          AND sales_daily_department.day = d.day;
      DELETE FROM sales_daily_department
        WHERE department = old.department AND count = 0
          AND day IN (SELECT date FROM sales WHERE employee_id = old.id);
      UPDATE sales_daily_department SET
        min_cents = (SELECT min(s.amount_cents) FROM sales s JOIN employees e ON e.id = s.employee_id
                     WHERE s.date = sales_daily_department.day AND e.department = old.department
                       AND s.employee_id != old.id),
        max_cents = (SELECT max(s.amount_cents) FROM sales s JOIN employees e ON e.id = s.employee_id
                     WHERE s.date = sales_daily_department.day AND e.department = old.department
                       AND s.employee_id != old.id)
        WHERE department = old.department
          AND EXISTS (SELECT 1 FROM sales s WHERE s.employee_id = old.id
                        AND s.date = sales_daily_department.day
                        AND (s.amount_cents <= sales_daily_department.min_cents
                             OR s.amount_cents >= sales_daily_department.max_cents));
    END;
    CREATE TRIGGER sales_daily_department_move AFTER UPDATE OF department ON employees
    WHEN old.department IS NOT new.department BEGIN
      UPDATE sales_daily_department SET
        count = sales_daily_department.count - d.count,
        total_cents = sales_daily_department.total_cents - d.total_cents,
        squares = sales_daily_department.squares - d.squares
        FROM (SELECT date AS day, count(*) AS count, sum(amount_cents) AS total_cents,
                     sum(amount_cents * amount_cents) AS squares
              FROM sales WHERE employee_id = new.id GROUP BY date) AS d
        WHERE sales_daily_department.department = old.department
          AND sales_daily_department.day = d.day;
      DELETE FROM sales_daily_department
        WHERE department = old.department AND count = 0
          AND day IN (SELECT date FROM sales WHERE employee_id = new.id);
      -- The employee's row already names the new department: these recounts leave them out.
      UPDATE sales_daily_department SET
        min_cents = (SELECT min(s.amount_cents) FROM sales s JOIN employees e ON e.id = s.employee_id
                     WHERE s.date = sales_daily_department.day AND e.department = old.department),
        max_cents = (SELECT max(s.amount_cents) FROM sales s JOIN employees e ON e.id = s.employee_id
                     WHERE s.date = sales_daily_department.day AND e.department = old.department)
        WHERE department = old.department
          AND EXISTS (SELECT 1 FROM sales s WHERE s.employee_id = new.id
                        AND s.date = sales_daily_department.day
                        AND (s.amount_cents <= sales_daily_department.min_cents
                             OR s.amount_cents >= sales_daily_department.max_cents));
      INSERT INTO sales_daily_department
        (day, department, count, total_cents, squares, min_cents, max_cents)
        SELECT date, new.department, count(*), sum(amount_cents),
               sum(amount_cents * amount_cents), min(amount_cents), max(amount_cents)
        FROM sales WHERE employee_id = new.id GROUP BY date
        ON CONFLICT (day, department) DO UPDATE SET
          count = count + excluded.count,
          total_cents = total_cents + excluded.total_cents,
          squares = squares + excluded.squares,
          min_cents = min(min_cents, excluded.min_cents),
          max_cents = max(max_cents, excluded.max_cents);
    END;
    """
}
