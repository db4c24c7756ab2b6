internal import Foundation
internal import GRDB
public import RosterDomain
internal import RosterPictures

extension SQLiteMaintenance {
  /// What `check` found: every problem, said for the operator, and what it looked at.
  public struct CheckReport: Sendable {
    public var problems: [String] = []
    /// The picture files read and hashed.
    public var pictureFiles = 0
    /// The counters and rollups recounted, by table.
    public var recounted: [String] = []

    public var isHealthy: Bool { self.problems.isEmpty }
  }

  /// A counter or rollup the triggers keep: the columns `table` holds them in (the rows
  /// `filter` keeps, when the triggers leave zero rows in place), and the query that recounts
  /// them from the rows, in the same order.
  package struct Recount: Sendable {
    /// The name the check reports: the table, or `table.column` for counters in a row.
    package var name: String
    package var table: String
    package var columns: String
    package var filter: String? = nil
    package var recount: String

    /// The kept values, read in the order `recount` yields them.
    package var kept: String {
      "SELECT \(self.columns) FROM \(self.table)" + (self.filter.map { " WHERE \($0)" } ?? "")
    }
  }

  /// Every counter and rollup the triggers keep, and the query that recounts it from the rows.
  /// Each pair must hold the same rows (a table's zero rows are deleted by its triggers).
  package static let recounts: [Recount] = [
    Recount(
      name: "department_stats",
      table: "department_stats",
      columns: "department, headcount, active_count, vacation_days_total",
      recount:
        "SELECT department, count(*), sum(active), sum(vacation_days) FROM employees GROUP BY department"
    ),
    Recount(
      name: "employees.sales_count",
      table: "employees",
      columns: "id, sales_count, sales_total_cents",
      filter: "sales_count != 0 OR sales_total_cents != 0",
      recount: "SELECT employee_id, count(*), sum(amount_cents) FROM sales GROUP BY employee_id"
    ),
    Recount(
      name: "sales_daily",
      table: "sales_daily",
      columns: "employee_id, day, count, total_cents",
      recount: "SELECT employee_id, date, count(*), sum(amount_cents) FROM sales GROUP BY 1, 2"
    ),
    Recount(
      name: "sales_monthly",
      table: "sales_monthly",
      columns: "month, count, total_cents",
      filter: "count != 0",
      recount: "SELECT substr(date, 1, 7), count(*), sum(amount_cents) FROM sales GROUP BY 1"
    ),
    Recount(
      name: "sales_monthly_department",
      table: "sales_monthly_department",
      columns: "department, month, count, total_cents",
      recount: """
        SELECT e.department, substr(s.date, 1, 7), count(*), sum(s.amount_cents)
        FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2
        """
    ),
    Recount(
      name: "sales_daily_department",
      table: "sales_daily_department",
      columns: "day, department, count, total_cents, squares, min_cents, max_cents",
      recount: """
        SELECT s.date, e.department, count(*), sum(s.amount_cents), sum(s.amount_cents * s.amount_cents),
               min(s.amount_cents), max(s.amount_cents)
        FROM sales s JOIN employees e ON e.id = s.employee_id GROUP BY 1, 2
        """
    ),
    Recount(
      name: "sales_amount_buckets",
      table: "sales_amount_buckets",
      columns: "period, department, bucket, count",
      recount: """
        SELECT \(SQLiteStore.period("s.date")), e.department, \(AmountBuckets.sql("s.amount_cents")), count(*)
        FROM sales s JOIN employees e ON e.id = s.employee_id, \(SQLiteStore.periodKinds)
        GROUP BY 1, 2, 3
        """
    ),
  ]

  /// Verifies a database and its picture files: SQLite's `integrity_check` and
  /// `foreign_key_check`, every counter and rollup against a recount from the rows, every
  /// picture an employee names against its row, and every picture file against its size and
  /// its SHA-256 (the file's name). Reads only, from one snapshot; runs beside a server.
  ///
  /// `progress` shows the recounts (with the integrity check and the foreign keys, one step
  /// each) and the picture files hashed as they go (`ProgressMeter`).
  public static func check(
    database: String,
    picturesDirectory: String? = nil,
    progress: ProgressMeter.Output = .silent
  ) throws -> CheckReport {
    guard FileManager.default.fileExists(atPath: database) else {
      throw Failure("no database at \(database)")
    }
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    let queue = try DatabaseQueue(path: database, configuration: configuration)
    defer { try? queue.close() }
    var report = CheckReport()
    let steps = ProgressMeter("checks", total: Int64(2 + Self.recounts.count), output: progress)
    let files: [(etag: String, size: Int64)] = try queue.read { db in
      defer { steps.finish() }
      let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
      steps.advance(by: 1)
      if integrity != ["ok"] {
        report.problems += integrity.prefix(20).map { "integrity_check: \($0)" }
      }
      let foreignKeys = try Row.fetchAll(db, sql: "PRAGMA foreign_key_check")
      if !foreignKeys.isEmpty {
        report.problems.append(
          "foreign_key_check: \(foreignKeys.count) rows refer to rows that are gone"
        )
      }
      steps.advance(by: 1)
      let tables = Set(
        try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
      )
      for pair in Self.recounts {
        defer { steps.advance(by: 1) }
        guard tables.contains(pair.table) else { continue }
        let (kept, recount) = (pair.kept, pair.recount)
        let extra =
          try Int.fetchOne(db, sql: "SELECT count(*) FROM (\(kept) EXCEPT \(recount))") ?? 0
        let missing =
          try Int.fetchOne(db, sql: "SELECT count(*) FROM (\(recount) EXCEPT \(kept))") ?? 0
        report.recounted.append(pair.name)
        if extra + missing > 0 {
          report.problems.append(
            "\(pair.name): \(max(extra, missing)) rows differ from a recount of the rows they sum"
          )
        }
      }
      let dangling =
        try Int.fetchOne(
          db,
          sql: """
            SELECT count(*) FROM employees WHERE picture_etag IS NOT NULL
              AND picture_etag NOT IN (SELECT etag FROM pictures)
            """
        ) ?? 0
      if dangling > 0 {
        report.problems.append("pictures: \(dangling) employees name a picture with no row")
      }
      return try Row.fetchAll(db, sql: "SELECT etag, size FROM pictures WHERE data IS NULL").map {
        (etag: $0["etag"], size: $0["size"])
      }
    }
    let directory = picturesDirectory ?? StoreConfiguration(path: database).picturesDirectory
    let pictureFiles = try PictureFiles(directory: directory)
    let hashed = ProgressMeter("pictures hashed", total: Int64(files.count), output: progress)
    defer { hashed.finish() }
    for (etag, size) in files {
      defer { hashed.advance(by: 1) }
      guard PictureFiles.isEtag(etag) else {
        report.problems.append("pictures: a row's etag '\(etag)' is not a SHA-256")
        continue
      }
      report.pictureFiles += 1
      if let problem = pictureFiles.problem(etag: etag, size: size) {
        report.problems.append("pictures: \(problem)")
      }
    }
    return report
  }

  /// Puts the backup in `backup` in place of the database at `database` (and its picture
  /// directory) for a server that is stopped. What was there is kept beside it, renamed with
  /// `.replaced-TIME`; the backup is checked first (`check`) unless `force`.
  ///
  /// - Throws: `Failure` when a server has the database open, or the backup fails its check.
  public static func restore(
    from backup: String,
    database: String,
    picturesDirectory: String? = nil,
    force: Bool = false,
    progress: ProgressMeter.Output = .silent
  ) throws -> CheckReport {
    let manager = FileManager.default
    let copy = "\(backup)/\(Self.databaseName)"
    let pictures = "\(backup)/\(Self.picturesName)"
    guard manager.fileExists(atPath: copy) else {
      throw Failure("\(backup) holds no \(Self.databaseName)")
    }
    if Self.isOpen(database) {
      throw Failure("a process has \(database) open (a server?): stop it before restoring")
    }
    let report = try Self.check(database: copy, picturesDirectory: pictures, progress: progress)
    if !report.isHealthy && !force {
      throw Failure(
        "the backup fails its check (restore anyway with --force):\n"
          + report.problems.joined(separator: "\n")
      )
    }
    let targetPictures = picturesDirectory ?? StoreConfiguration(path: database).picturesDirectory
    let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
    for path in [database, database + "-wal", database + "-shm", targetPictures]
    where manager.fileExists(atPath: path) {
      try manager.moveItem(atPath: path, toPath: "\(path).replaced-\(stamp)")
    }
    try manager.createDirectory(
      atPath: (database as NSString).deletingLastPathComponent.isEmpty
        ? "." : (database as NSString).deletingLastPathComponent,
      withIntermediateDirectories: true
    )
    try manager.copyItem(atPath: copy, toPath: database)
    let source = try PictureFiles(directory: pictures)
    let target = try PictureFiles(directory: targetPictures)
    for etag in source.inventory().etags {
      let to = target.path(etag: etag)
      try manager.createDirectory(
        atPath: (to as NSString).deletingLastPathComponent,
        withIntermediateDirectories: true
      )
      if link(source.path(etag: etag), to) != 0 {
        try manager.copyItem(atPath: source.path(etag: etag), toPath: to)
      }
    }
    sync()
    return report
  }

  /// Whether a process has `database` open in WAL mode: every SQLite connection to it holds a
  /// shared lock on its `-shm` file's DMS byte (offset 128) while it is open, so a write lock
  /// there would conflict.
  public static func isOpen(_ database: String) -> Bool {
    let descriptor = open(database + "-shm", O_RDWR | O_CLOEXEC)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var lock = flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 128
    lock.l_len = 1
    guard fcntl(descriptor, F_GETLK, &lock) == 0 else { return false }
    return lock.l_type != Int16(F_UNLCK)
  }
}
