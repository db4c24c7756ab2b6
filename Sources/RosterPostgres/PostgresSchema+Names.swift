/// The employees-per-name counters (migrations 3 and 7): what a name search and a count by name
/// read instead of the employees.
extension PostgresSchema {
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
  /// instead of visiting every matching employee (most of them, for one common letter).
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
}
