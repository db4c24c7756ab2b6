internal import GRDB
internal import RosterDomain

extension SQLiteStore {
  /// The schema's history. Each migration is SQL text, and a shipped one is never edited:
  /// changes go in a new migration appended at the end.
  static var migrator: DatabaseMigrator {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1: employees, thumbnails, name search") { db in
      try db.execute(sql: Self.employeesSchema)
    }
    migrator.registerMigration("v2: bulk load journal") { db in
      // The DDL a bulk load dropped, kept until it is rebuilt, so a crash mid-load cannot
      // leave the database without its indexes.
      try db.execute(sql: "CREATE TABLE bulk_load_pending (sql TEXT NOT NULL)")
    }
    migrator.registerMigration("v3: change log") { db in
      try db.execute(sql: Self.changeLogSchema)
    }
    migrator.registerMigration("v4: pictures") { db in
      try db.execute(sql: Self.picturesSchema)
    }
    migrator.registerMigration("v5: sales and analytics counters") { db in
      try db.execute(sql: Self.analyticsSchema)
    }
    migrator.registerMigration("v6: monthly sales totals for everyone") { db in
      try db.execute(sql: Self.monthlyTotalsSchema)
    }
    migrator.registerMigration("v7: search over distinct names") { db in
      try db.execute(sql: Self.nameDictionarySchema)
    }
    migrator.registerMigration("v8: daily sales statistics per department") { db in
      try db.execute(sql: Self.dailyDepartmentSchema)
    }
    migrator.registerMigration("v9: sales per amount bucket, for medians") { db in
      try db.execute(sql: Self.amountBucketsSchema)
    }
    migrator.registerMigration("v10: employees by e-mail address") { db in
      // LookupEmployee: ASCII letters compared without case, the first created first.
      try db.execute(
        sql: "CREATE INDEX employees_by_email ON employees(email COLLATE NOCASE, id)"
      )
    }
    migrator.registerMigration("v11: active employees per name") { db in
      try db.execute(sql: Self.activeNamesSchema)
    }
    migrator.registerMigration("v12: whom a change's author acted for") { db in
      try db.execute(
        sql: "ALTER TABLE change_log ADD COLUMN on_behalf_of TEXT NOT NULL DEFAULT ''"
      )
    }
    return migrator
  }

  /// Search moves from every employee's name to the distinct folded names, each with how many
  /// employees carry it. A search finds the matching names first (a scan of the names, or
  /// their trigram index for three characters or more), then reads their employees through
  /// the (…, name_folded) indexes, already in name order. A directory repeats names (the demo
  /// data has 3,000 for a million employees), and a write of an employee whose name is
  /// already known changes one counter instead of a trigram index entry per character.
  static let nameDictionarySchema = """
    CREATE TABLE employee_names (
      id          INTEGER PRIMARY KEY,
      name_folded TEXT    NOT NULL UNIQUE,
      employees   INTEGER NOT NULL
    );
    INSERT INTO employee_names (name_folded, employees)
      SELECT name_folded, count(*) FROM employees GROUP BY name_folded;

    -- Trigrams of the distinct names. The text is folded before it gets here, because the
    -- trigram tokenizer of SQLite 3.40 cannot remove diacritics itself. A row's name never
    -- changes: only its counter does, and a name no one carries any more goes.
    CREATE VIRTUAL TABLE employee_names_fts USING fts5(
      name_folded,
      content = 'employee_names',
      content_rowid = 'id',
      tokenize = 'trigram case_sensitive 1'
    );
    INSERT INTO employee_names_fts(employee_names_fts) VALUES ('rebuild');
    CREATE TRIGGER employee_names_fts_insert AFTER INSERT ON employee_names BEGIN
      INSERT INTO employee_names_fts(rowid, name_folded) VALUES (new.id, new.name_folded);
    END;
    CREATE TRIGGER employee_names_fts_delete AFTER DELETE ON employee_names BEGIN
      INSERT INTO employee_names_fts(employee_names_fts, rowid, name_folded)
        VALUES ('delete', old.id, old.name_folded);
    END;

    CREATE TRIGGER employee_names_insert AFTER INSERT ON employees BEGIN
      INSERT INTO employee_names (name_folded, employees) VALUES (new.name_folded, 1)
        ON CONFLICT (name_folded) DO UPDATE SET employees = employees + 1;
    END;
    CREATE TRIGGER employee_names_delete AFTER DELETE ON employees BEGIN
      UPDATE employee_names SET employees = employees - 1 WHERE name_folded = old.name_folded;
      DELETE FROM employee_names WHERE name_folded = old.name_folded AND employees = 0;
    END;
    CREATE TRIGGER employee_names_update AFTER UPDATE OF name_folded ON employees
    WHEN old.name_folded IS NOT new.name_folded BEGIN
      UPDATE employee_names SET employees = employees - 1 WHERE name_folded = old.name_folded;
      DELETE FROM employee_names WHERE name_folded = old.name_folded AND employees = 0;
      INSERT INTO employee_names (name_folded, employees) VALUES (new.name_folded, 1)
        ON CONFLICT (name_folded) DO UPDATE SET employees = employees + 1;
    END;

    -- The trigram index over every employee's name, which these replace.
    DROP TRIGGER employees_fts_insert;
    DROP TRIGGER employees_fts_delete;
    DROP TRIGGER employees_fts_update;
    DROP TABLE employees_fts;
    """

  /// Each distinct name also counts its active employees, so that a count of the active (or
  /// inactive) employees whose name contains a text adds up the matching names' counters, as
  /// the count of everyone's already did, instead of visiting every matching employee (most
  /// of them, for one common letter).
  static let activeNamesSchema = """
    ALTER TABLE employee_names ADD COLUMN active INTEGER NOT NULL DEFAULT 0;
    UPDATE employee_names SET active = a.count
      FROM (SELECT name_folded, count(*) AS count FROM employees WHERE active GROUP BY 1) AS a
      WHERE a.name_folded = employee_names.name_folded;

    DROP TRIGGER employee_names_insert;
    DROP TRIGGER employee_names_delete;
    DROP TRIGGER employee_names_update;
    CREATE TRIGGER employee_names_insert AFTER INSERT ON employees BEGIN
      INSERT INTO employee_names (name_folded, employees, active)
        VALUES (new.name_folded, 1, new.active != 0)
        ON CONFLICT (name_folded) DO UPDATE
        SET employees = employees + 1, active = active + excluded.active;
    END;
    CREATE TRIGGER employee_names_delete AFTER DELETE ON employees BEGIN
      UPDATE employee_names SET employees = employees - 1, active = active - (old.active != 0)
        WHERE name_folded = old.name_folded;
      DELETE FROM employee_names WHERE name_folded = old.name_folded AND employees = 0;
    END;
    CREATE TRIGGER employee_names_update AFTER UPDATE OF name_folded, active ON employees
    WHEN old.name_folded IS NOT new.name_folded BEGIN
      UPDATE employee_names SET employees = employees - 1, active = active - (old.active != 0)
        WHERE name_folded = old.name_folded;
      DELETE FROM employee_names WHERE name_folded = old.name_folded AND employees = 0;
      INSERT INTO employee_names (name_folded, employees, active)
        VALUES (new.name_folded, 1, new.active != 0)
        ON CONFLICT (name_folded) DO UPDATE
        SET employees = employees + 1, active = active + excluded.active;
    END;
    CREATE TRIGGER employee_names_active AFTER UPDATE OF active ON employees
    WHEN old.name_folded IS new.name_folded AND (old.active != 0) IS NOT (new.active != 0) BEGIN
      UPDATE employee_names SET active = active + (new.active != 0) - (old.active != 0)
        WHERE name_folded = new.name_folded;
    END;
    """

  private static let picturesSchema = """
    -- Full pictures, once per content (etag = SHA-256). Small ones keep their bytes here;
    -- larger ones live in a file named by the etag, and `data` is NULL.
    CREATE TABLE pictures (
      etag         TEXT    NOT NULL PRIMARY KEY,
      size         INTEGER NOT NULL,
      content_type TEXT    NOT NULL,
      width        INTEGER NOT NULL,
      height       INTEGER NOT NULL,
      data         BLOB
    );
    CREATE INDEX employees_by_picture ON employees(picture_etag) WHERE picture_etag IS NOT NULL;

    -- A picture row goes with its last reference: a deleted employee (one at a time, in a
    -- batch, or by cascade), or one whose picture was replaced or removed.
    CREATE TRIGGER pictures_release_on_delete AFTER DELETE ON employees
    WHEN old.picture_etag IS NOT NULL BEGIN
      DELETE FROM pictures WHERE etag = old.picture_etag
        AND NOT EXISTS (SELECT 1 FROM employees WHERE picture_etag = old.picture_etag);
    END;
    CREATE TRIGGER pictures_release_on_update AFTER UPDATE OF picture_etag ON employees
    WHEN old.picture_etag IS NOT NULL AND old.picture_etag IS NOT new.picture_etag BEGIN
      DELETE FROM pictures WHERE etag = old.picture_etag
        AND NOT EXISTS (SELECT 1 FROM employees WHERE picture_etag = old.picture_etag);
    END;
    """

  private static let changeLogSchema = """
    -- The persistent history WatchChanges replays and tails. Rows are written in the same
    -- transaction as the change they record. AUTOINCREMENT keeps sequence numbers strictly
    -- increasing and never reused, even after pruning deletes the newest rows' predecessors.
    CREATE TABLE change_log (
      seq    INTEGER PRIMARY KEY AUTOINCREMENT,
      entity INTEGER NOT NULL,
      guid   TEXT    NOT NULL,
      kind   INTEGER NOT NULL,
      fields TEXT    NOT NULL DEFAULT '',
      author TEXT    NOT NULL DEFAULT '',
      time   INTEGER NOT NULL
    );
    CREATE INDEX change_log_by_time ON change_log(time);

    -- The newest sequence number pruning has removed: a token before it cannot be resumed.
    CREATE TABLE change_log_state (
      id            INTEGER PRIMARY KEY CHECK (id = 1),
      pruned_through INTEGER NOT NULL
    );
    INSERT INTO change_log_state (id, pruned_through) VALUES (1, 0);
    """

  private static let employeesSchema = """
    CREATE TABLE employees (
      id            INTEGER PRIMARY KEY,
      guid          TEXT    NOT NULL UNIQUE,
      name          TEXT    NOT NULL,
      name_folded   TEXT    NOT NULL,
      department    TEXT    NOT NULL,
      email         TEXT    NOT NULL DEFAULT '',
      phone         TEXT    NOT NULL DEFAULT '',
      address       TEXT    NOT NULL DEFAULT '',
      about         TEXT    NOT NULL DEFAULT '',
      active        INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
      start_date    TEXT    NOT NULL,
      vacation_days INTEGER NOT NULL DEFAULT 0 CHECK (vacation_days >= 0),
      picture_etag  TEXT,
      sales_count   INTEGER NOT NULL DEFAULT 0,
      update_time   INTEGER NOT NULL
    );

    -- Thumbnails live in their own table: a listing that does not ask for them never
    -- touches their pages, not even an overflow page shared with the row.
    CREATE TABLE employee_thumbnails (
      employee_id INTEGER PRIMARY KEY REFERENCES employees(id) ON DELETE CASCADE,
      data        BLOB    NOT NULL,
      width       INTEGER NOT NULL,
      height      INTEGER NOT NULL
    );

    -- One index per (filter, order) shape, so every page is a keyset range scan.
    CREATE INDEX employees_by_name ON employees(name_folded);
    CREATE INDEX employees_by_start ON employees(start_date);
    CREATE INDEX employees_by_dept_name ON employees(department, name_folded);
    CREATE INDEX employees_by_dept_start ON employees(department, start_date);
    CREATE INDEX employees_by_active_name ON employees(active, name_folded);
    CREATE INDEX employees_by_active_start ON employees(active, start_date);
    CREATE INDEX employees_by_active_dept_name ON employees(active, department, name_folded);
    CREATE INDEX employees_by_dept_active_name ON employees(department, active, name_folded);
    CREATE INDEX employees_by_dept_active_start ON employees(department, active, start_date);

    -- Substring search over folded names. The text is folded before it gets here, because
    -- the trigram tokenizer of SQLite 3.40 cannot remove diacritics itself.
    CREATE VIRTUAL TABLE employees_fts USING fts5(
      name_folded,
      content = 'employees',
      content_rowid = 'id',
      tokenize = 'trigram case_sensitive 1'
    );
    CREATE TRIGGER employees_fts_insert AFTER INSERT ON employees BEGIN
      INSERT INTO employees_fts(rowid, name_folded) VALUES (new.id, new.name_folded);
    END;
    CREATE TRIGGER employees_fts_delete AFTER DELETE ON employees BEGIN
      INSERT INTO employees_fts(employees_fts, rowid, name_folded)
        VALUES ('delete', old.id, old.name_folded);
    END;
    CREATE TRIGGER employees_fts_update AFTER UPDATE OF name_folded ON employees BEGIN
      INSERT INTO employees_fts(employees_fts, rowid, name_folded)
        VALUES ('delete', old.id, old.name_folded);
      INSERT INTO employees_fts(rowid, name_folded) VALUES (new.id, new.name_folded);
    END;
    """
}
