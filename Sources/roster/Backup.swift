import ArgumentParser
import Foundation
import RosterSQLite

/// Where a SQLite deployment lives: its database file and its picture directory.
struct SQLiteLocation: ParsableArguments {
  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Option(help: "The database's picture directory (default: <db>-pictures).")
  var picturesDir: String?
}

/// `roster backup`: a consistent copy of a SQLite database and its pictures, taken while the
/// server runs (`SQLiteMaintenance.backup`).
struct Backup: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Copy a running server's SQLite database and its picture files into a new directory."
  )

  @OptionGroup var database: SQLiteLocation

  @Option(help: "The new directory to write the backup into.")
  var out: String

  func run() throws {
    let started = ContinuousClock.now
    let report = try SQLiteMaintenance.backup(
      database: self.database.db,
      picturesDirectory: self.database.picturesDir,
      into: self.out,
      progress: .standardError
    )
    let elapsed = ContinuousClock.now - started
    print(
      "backed up \(self.database.db) into \(self.out): \(report.databaseBytes) bytes of database, "
        + "\(report.pictureFiles) picture files (\(report.linkedPictureFiles) hard-linked), "
        + "in \(elapsed.formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow)))"
        + (report.attempts > 1 ? " after \(report.attempts) snapshots" : "")
    )
  }
}

/// `roster restore`: puts a backup in place for a stopped server (`SQLiteMaintenance.restore`).
struct Restore: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract:
      "Put a backup in place of a stopped server's SQLite database (what was there is kept, renamed)."
  )

  @Argument(help: "The backup directory (made by roster backup).")
  var backup: String

  @OptionGroup var database: SQLiteLocation

  @Flag(help: "Restore even if the backup fails its check.")
  var force = false

  func run() throws {
    let report = try SQLiteMaintenance.restore(
      from: self.backup,
      database: self.database.db,
      picturesDirectory: self.database.picturesDir,
      force: self.force,
      progress: .standardError
    )
    print(
      "restored \(self.backup) into \(self.database.db): \(report.pictureFiles) picture files; "
        + (report.isHealthy ? "its check passed" : "\(report.problems.count) problems (--force)")
    )
  }
}

/// `roster check`: verifies a SQLite database and its pictures (`SQLiteMaintenance.check`);
/// exits 1 when it finds a problem.
struct Check: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract:
      "Verify a SQLite database: integrity, every counter against a recount, every picture file against its hash."
  )

  @OptionGroup var database: SQLiteLocation

  func run() throws {
    let report = try SQLiteMaintenance.check(
      database: self.database.db,
      picturesDirectory: self.database.picturesDir,
      progress: .standardError
    )
    for problem in report.problems { print("problem: \(problem)") }
    print(
      "checked \(self.database.db): integrity, \(report.recounted.count) counters and rollups recounted, "
        + "\(report.pictureFiles) picture files hashed: "
        + (report.isHealthy ? "ok" : "\(report.problems.count) problems")
    )
    if !report.isHealthy { throw ExitCode(1) }
  }
}
