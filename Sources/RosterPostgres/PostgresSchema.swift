/// One step of the schema's history: statements run in one transaction, recorded in
/// `schema_migrations`. A shipped migration is never edited: changes go in a new one.
struct Migration: Sendable {
  var version: Int
  var name: String
  var statements: [String]
}

/// The schema, as SQL, in the order it is applied.
///
/// Text that is compared or sorted is `COLLATE "C"` (byte order, as SQLite compares), so
/// keyset pages, group keys and cursors sort the same on both backends and every order is
/// served by a plain B-tree. Names are folded (case and diacritics removed) by the store
/// before they get here, as on SQLite; `pg_trgm` indexes the folded names for substring
/// search. Counters and rollups are kept by triggers in the writing transaction.
enum PostgresSchema {
  static let migrations: [Migration] = [
    Migration(version: 1, name: "employees, pictures, change log", statements: Self.directory),
    Migration(version: 2, name: "sales, counters and rollups", statements: Self.analytics),
    Migration(version: 3, name: "employees per folded name", statements: Self.names),
    Migration(
      version: 4,
      name: "daily statistics per department, sales per amount bucket",
      statements: Self.statistics
    ),
    Migration(
      version: 5,
      name: "department counts move only when their columns change",
      statements: Self.countedChanges
    ),
    Migration(
      version: 6,
      name: "employees by e-mail address",
      // LookupEmployee. lower() under the "C" collation folds ASCII letters only, as SQLite's
      // NOCASE does, whatever the database's locale.
      statements: [#"CREATE INDEX employees_by_email ON employees (lower(email COLLATE "C"), id)"#]
    ),
    Migration(version: 7, name: "active employees per folded name", statements: Self.activeNames),
  ]

  /// How many employees carry each folded name, as signed delta rows (like the department
  /// counters, so writers on different replicas never wait for one hot row), folded by
  /// maintenance. CountEmployees with only a name filter sums the rows whose name matches:
  /// it reads the distinct names, not every employee (as SQLite's `employee_names`).
  static let names = [
    """
    CREATE TABLE name_counts (
      id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name_folded TEXT COLLATE "C" NOT NULL,
      employees   BIGINT NOT NULL
    )
    """,
    "CREATE INDEX name_counts_by_name ON name_counts (name_folded)",
    "INSERT INTO name_counts (name_folded, employees) SELECT name_folded, count(*) FROM employees GROUP BY name_folded",
    """
    CREATE FUNCTION name_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        INSERT INTO name_counts (name_folded, employees) VALUES (OLD.name_folded, -1);
      END IF;
      IF TG_OP <> 'DELETE' THEN
        INSERT INTO name_counts (name_folded, employees) VALUES (NEW.name_folded, 1);
      END IF;
      RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER name_counts_track AFTER INSERT OR DELETE ON employees
    FOR EACH ROW EXECUTE FUNCTION name_counts_track()
    """,
    """
    CREATE TRIGGER name_counts_rename AFTER UPDATE OF name_folded ON employees
    FOR EACH ROW WHEN (OLD.name_folded IS DISTINCT FROM NEW.name_folded) EXECUTE FUNCTION name_counts_track()
    """,
  ]

  /// Each name's delta rows also count its active employees, so that CountEmployees with a
  /// name and the active flag sums the matching names' rows, as it did without the flag,
  /// instead of visiting every matching employee (about 600,000 for one letter at a million).
  /// The rows are recounted once here; a change of the flag writes a delta for each side.
  static let activeNames = [
    "ALTER TABLE name_counts ADD COLUMN active BIGINT NOT NULL DEFAULT 0",
    "DELETE FROM name_counts",
    """
    INSERT INTO name_counts (name_folded, employees, active)
    SELECT name_folded, count(*), count(*) FILTER (WHERE active) FROM employees GROUP BY name_folded
    """,
    """
    CREATE OR REPLACE FUNCTION name_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        INSERT INTO name_counts (name_folded, employees, active)
        VALUES (OLD.name_folded, -1, -(OLD.active::int));
      END IF;
      IF TG_OP <> 'DELETE' THEN
        INSERT INTO name_counts (name_folded, employees, active)
        VALUES (NEW.name_folded, 1, NEW.active::int);
      END IF;
      RETURN NULL;
    END $$
    """,
    "DROP TRIGGER name_counts_rename ON employees",
    """
    CREATE TRIGGER name_counts_rename AFTER UPDATE OF name_folded, active ON employees
    FOR EACH ROW WHEN (OLD.name_folded IS DISTINCT FROM NEW.name_folded OR OLD.active IS DISTINCT FROM NEW.active)
    EXECUTE FUNCTION name_counts_track()
    """,
  ]

  static let directory = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public",
    """
    -- Full pictures, once per content (etag = SHA-256), in chunks every replica can read.
    CREATE TABLE pictures (
      etag         TEXT COLLATE "C" PRIMARY KEY,
      size         BIGINT  NOT NULL,
      content_type TEXT    NOT NULL,
      width        INTEGER NOT NULL,
      height       INTEGER NOT NULL,
      chunk_bytes  INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE picture_chunks (
      etag TEXT COLLATE "C" NOT NULL REFERENCES pictures(etag) ON DELETE CASCADE,
      n    INTEGER NOT NULL,
      data BYTEA   NOT NULL,
      PRIMARY KEY (etag, n)
    )
    """,
    // JPEG and PNG bytes do not compress: store them as they are.
    "ALTER TABLE picture_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    """
    CREATE TABLE employees (
      id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      guid          TEXT COLLATE "C" NOT NULL UNIQUE,
      name          TEXT    NOT NULL,
      name_folded   TEXT COLLATE "C" NOT NULL,
      department    TEXT COLLATE "C" NOT NULL,
      email         TEXT    NOT NULL DEFAULT '',
      phone         TEXT    NOT NULL DEFAULT '',
      address       TEXT    NOT NULL DEFAULT '',
      about         TEXT    NOT NULL DEFAULT '',
      active        BOOLEAN NOT NULL DEFAULT true,
      start_date    TEXT COLLATE "C" NOT NULL,
      vacation_days INTEGER NOT NULL DEFAULT 0 CHECK (vacation_days >= 0),
      -- A picture row cannot go while an employee points at it (see release_picture).
      picture_etag  TEXT COLLATE "C" REFERENCES pictures(etag),
      sales_count       BIGINT NOT NULL DEFAULT 0,
      sales_total_cents BIGINT NOT NULL DEFAULT 0,
      update_time   BIGINT  NOT NULL
    )
    """,
    """
    -- Thumbnails in their own table: a listing that does not ask for them never reads them.
    CREATE TABLE employee_thumbnails (
      employee_id BIGINT PRIMARY KEY REFERENCES employees(id) ON DELETE CASCADE,
      data        BYTEA   NOT NULL,
      width       INTEGER NOT NULL,
      height      INTEGER NOT NULL
    )
    """,
    // One index per (filter, order) shape, the row id last, so every page is one range scan
    // of one index, in order, from the cursor on.
    "CREATE INDEX employees_by_name ON employees (name_folded, id)",
    "CREATE INDEX employees_by_start ON employees (start_date, id)",
    "CREATE INDEX employees_by_dept_name ON employees (department, name_folded, id)",
    "CREATE INDEX employees_by_dept_start ON employees (department, start_date, id)",
    "CREATE INDEX employees_by_active_name ON employees (active, name_folded, id)",
    "CREATE INDEX employees_by_active_start ON employees (active, start_date, id)",
    "CREATE INDEX employees_by_active_dept_name ON employees (active, department, name_folded, id)",
    "CREATE INDEX employees_by_dept_active_name ON employees (department, active, name_folded, id)",
    "CREATE INDEX employees_by_dept_active_start ON employees (department, active, start_date, id)",
    "CREATE INDEX employees_by_picture ON employees (picture_etag) WHERE picture_etag IS NOT NULL",
    // Substring search over folded names.
    "CREATE INDEX employees_name_trigrams ON employees USING gin (name_folded public.gin_trgm_ops)",
    """
    -- A picture goes with its last reference, unless a transaction that is about to
    -- reference it holds its row (an upload of the same content): then it stays, and the
    -- periodic sweep removes it if it ends up unreferenced.
    CREATE FUNCTION release_picture() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF OLD.picture_etag IS NOT NULL
         AND (TG_OP = 'DELETE' OR OLD.picture_etag IS DISTINCT FROM NEW.picture_etag) THEN
        DELETE FROM pictures p
        WHERE p.etag IN (SELECT etag FROM pictures WHERE etag = OLD.picture_etag
                         FOR UPDATE SKIP LOCKED)
          AND NOT EXISTS (SELECT 1 FROM employees e WHERE e.picture_etag = OLD.picture_etag);
      END IF;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER release_picture AFTER DELETE OR UPDATE OF picture_etag ON employees
    FOR EACH ROW EXECUTE FUNCTION release_picture()
    """,
    """
    -- The persistent history WatchChanges replays and tails. Sequence numbers come from
    -- change_log_state.last_seq, taken by each writing transaction just before it commits:
    -- the row lock orders the numbering by commit, across every replica, with no gaps.
    CREATE TABLE change_log (
      seq    BIGINT   PRIMARY KEY,
      entity SMALLINT NOT NULL,
      guid   TEXT     NOT NULL,
      kind   SMALLINT NOT NULL,
      fields TEXT     NOT NULL DEFAULT '',
      author TEXT     NOT NULL DEFAULT '',
      time   BIGINT   NOT NULL
    )
    """,
    "CREATE INDEX change_log_by_time ON change_log (time)",
    """
    CREATE TABLE change_log_state (
      id             INTEGER PRIMARY KEY CHECK (id = 1),
      last_seq       BIGINT  NOT NULL,
      pruned_through BIGINT  NOT NULL
    )
    """,
    "INSERT INTO change_log_state (id, last_seq, pruned_through) VALUES (1, 0, 0)",
  ]

  static let analytics = [
    """
    -- Amounts are whole cents, so every counter and rollup adds up exactly.
    CREATE TABLE sales (
      id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      employee_id  BIGINT NOT NULL REFERENCES employees(id) ON DELETE CASCADE,
      amount_cents BIGINT NOT NULL CHECK (amount_cents >= 0),
      date         TEXT COLLATE "C" NOT NULL
    )
    """,
    "CREATE INDEX sales_by_employee_date ON sales (employee_id, date) INCLUDE (amount_cents)",
    "CREATE INDEX sales_by_date ON sales (date) INCLUDE (amount_cents)",
    """
    -- Department counters as signed deltas, one row per change, summed on read: no write
    -- updates a shared row, so concurrent writes on several replicas never wait for each
    -- other (or deadlock) over a department. Maintenance folds them into one row per
    -- department (compactDepartmentCounts).
    CREATE TABLE department_counts (
      id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      department          TEXT COLLATE "C" NOT NULL,
      headcount           BIGINT NOT NULL,
      active_count        BIGINT NOT NULL,
      vacation_days_total BIGINT NOT NULL
    )
    """,
    "CREATE INDEX department_counts_by_department ON department_counts (department)",
    """
    CREATE VIEW department_stats AS
    SELECT department, sum(headcount)::int8 AS headcount, sum(active_count)::int8 AS active_count,
           sum(vacation_days_total)::int8 AS vacation_days_total
    FROM department_counts GROUP BY department HAVING sum(headcount) > 0
    """,
    """
    CREATE TABLE sales_daily (
      employee_id BIGINT NOT NULL,
      day         TEXT COLLATE "C" NOT NULL,
      count       BIGINT NOT NULL,
      total_cents BIGINT NOT NULL,
      PRIMARY KEY (employee_id, day)
    )
    """,
    """
    CREATE TABLE sales_monthly_department (
      department  TEXT COLLATE "C" NOT NULL,
      month       TEXT COLLATE "C" NOT NULL,
      count       BIGINT NOT NULL,
      total_cents BIGINT NOT NULL,
      PRIMARY KEY (department, month)
    )
    """,
    """
    CREATE TABLE sales_monthly (
      month       TEXT COLLATE "C" PRIMARY KEY,
      count       BIGINT NOT NULL,
      total_cents BIGINT NOT NULL
    )
    """,
    """
    CREATE FUNCTION department_stats_track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        INSERT INTO department_counts (department, headcount, active_count, vacation_days_total)
        VALUES (OLD.department, -1, -OLD.active::int, -OLD.vacation_days);
      END IF;
      IF TG_OP <> 'DELETE' THEN
        INSERT INTO department_counts (department, headcount, active_count, vacation_days_total)
        VALUES (NEW.department, 1, NEW.active::int, NEW.vacation_days);
      END IF;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER department_stats_track
    AFTER INSERT OR DELETE OR UPDATE OF department, active, vacation_days ON employees
    FOR EACH ROW EXECUTE FUNCTION department_stats_track()
    """,
    """
    -- Before an employee goes, their monthly department rollups are settled from their daily
    -- ones, while their department is still known; the cascaded deletes of their sales then
    -- find no employee and change only the company-wide months.
    CREATE FUNCTION sales_settle_employee() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE sales_monthly_department m SET
        count = m.count - d.count,
        total_cents = m.total_cents - d.total_cents
      FROM (SELECT left(day, 7) AS month, sum(count) AS count, sum(total_cents) AS total_cents
            FROM sales_daily WHERE employee_id = OLD.id GROUP BY 1) d
      WHERE m.department = OLD.department AND m.month = d.month;
      DELETE FROM sales_monthly_department WHERE department = OLD.department AND count = 0;
      DELETE FROM sales_daily WHERE employee_id = OLD.id;
      RETURN OLD;
    END
    $$
    """,
    """
    CREATE TRIGGER sales_settle_employee BEFORE DELETE ON employees
    FOR EACH ROW EXECUTE FUNCTION sales_settle_employee()
    """,
    """
    -- A change of department moves the employee's monthly sales with them.
    CREATE FUNCTION sales_move_department() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE sales_monthly_department m SET
        count = m.count - d.count,
        total_cents = m.total_cents - d.total_cents
      FROM (SELECT left(day, 7) AS month, sum(count) AS count, sum(total_cents) AS total_cents
            FROM sales_daily WHERE employee_id = NEW.id GROUP BY 1) d
      WHERE m.department = OLD.department AND m.month = d.month;
      DELETE FROM sales_monthly_department WHERE department = OLD.department AND count = 0;
      INSERT INTO sales_monthly_department AS m (department, month, count, total_cents)
        SELECT NEW.department, left(day, 7), sum(count), sum(total_cents)
        FROM sales_daily WHERE employee_id = NEW.id GROUP BY 2
      ON CONFLICT (department, month) DO UPDATE SET
        count = m.count + EXCLUDED.count,
        total_cents = m.total_cents + EXCLUDED.total_cents;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER sales_move_department AFTER UPDATE OF department ON employees
    FOR EACH ROW WHEN (OLD.department IS DISTINCT FROM NEW.department)
    EXECUTE FUNCTION sales_move_department()
    """,
    """
    CREATE FUNCTION sales_track() RETURNS trigger LANGUAGE plpgsql AS $$
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
      END IF;
      UPDATE sales_monthly SET count = count - 1, total_cents = total_cents - OLD.amount_cents
      WHERE month = left(OLD.date, 7);
      DELETE FROM sales_monthly WHERE month = left(OLD.date, 7) AND count = 0;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER sales_track AFTER INSERT OR DELETE ON sales
    FOR EACH ROW EXECUTE FUNCTION sales_track()
    """,
  ]

  /// An update sets the columns its statement names (a prepared `EmployeeUpdate` names every
  /// column it may set, keeping the others as they were): the department counts move only
  /// when one they hold has changed, not for every row an UPDATE touched.
  static let countedChanges = [
    "DROP TRIGGER department_stats_track ON employees",
    """
    CREATE TRIGGER department_stats_track AFTER INSERT OR DELETE ON employees
    FOR EACH ROW EXECUTE FUNCTION department_stats_track()
    """,
    """
    CREATE TRIGGER department_stats_change AFTER UPDATE OF department, active, vacation_days ON employees
    FOR EACH ROW WHEN (
      OLD.department IS DISTINCT FROM NEW.department OR OLD.active IS DISTINCT FROM NEW.active
      OR OLD.vacation_days IS DISTINCT FROM NEW.vacation_days)
    EXECUTE FUNCTION department_stats_track()
    """,
  ]
}
