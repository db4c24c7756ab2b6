import Foundation
import RosterDomain
import RosterSQLite
import RosterSeed
import TestSupport
import Testing

@Suite("Backup, restore and check", .timeLimit(.minutes(10)))
struct BackupTests {
  /// A store with demo employees, pictures (some large enough to be files) and sales.
  static func withDemoStore(
    _ body: (SQLiteStore, _ directory: String, _ pictures: [Data]) async throws -> Void
  ) async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteStore(configuration: StoreConfiguration(path: directory + "/live.sqlite"))
    let demo = DemoData(count: 150, pictures: true)
    let pool = directory + "/pool"
    _ = try await DirectoryLoader(context: WriteContext(author: "test")).load(
      DemoSource(demo: demo, pictureScratch: pool, keepsPictures: true, salesPerEmployee: 3),
      into: store
    )
    let pictures = try FileManager.default.contentsOfDirectory(atPath: pool).sorted()
      .filter { $0.hasSuffix(".jpg") }
      .map { try Data(contentsOf: URL(fileURLWithPath: "\(pool)/\($0)")) }
    try await body(store, directory, pictures)
  }

  static func upload(_ bytes: Data, for guid: String, into store: SQLiteStore) async throws {
    let upload = try await store.beginPictureUpload(
      guid: guid,
      contentType: "image/jpeg",
      totalSize: Int64(bytes.count)
    )
    try await upload.append(bytes)
    _ = try await upload.finish(context: WriteContext(author: "test"))
  }

  @Test(
    "a backup taken under writes holds every write acknowledged before it began, passes its check, and restores to a store that reads the same as the source did"
  )
  func underWrites() async throws {
    try await Self.withDemoStore { store, directory, pictures in
      var before: [String] = []
      for index in 0 ..< 20 {
        before.append(try await store.createEmployee(makeEmployee(name: "Before \(index)")).guid)
      }
      // Writes go on throughout: new employees, and pictures replaced over and over (each
      // replacement releases the file it replaces).
      let owners = try await store.employeePage(
        fields: [.guid],
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 10
      ).employees.map(\.guid)
      let writer = Task {
        var writes = 0
        while !Task.isCancelled {
          _ = try await store.createEmployee(makeEmployee(name: "During \(writes)"))
          try await Self.upload(
            pictures[writes % pictures.count],
            for: owners[writes % owners.count],
            into: store
          )
          writes += 1
        }
        return writes
      }
      let backupDirectory = directory + "/backup"
      let report = try await Task.detached {
        try SQLiteMaintenance.backup(database: directory + "/live.sqlite", into: backupDirectory)
      }.value
      writer.cancel()
      let writes = (try? await writer.value) ?? 0
      #expect(report.pictureFiles > 0, "the demo pictures include files")
      #expect(
        report.linkedPictureFiles == report.pictureFiles,
        "one filesystem: every file a hard link"
      )

      let check = try SQLiteMaintenance.check(
        database: "\(backupDirectory)/roster.sqlite",
        picturesDirectory: "\(backupDirectory)/pictures"
      )
      #expect(check.isHealthy, "\(check.problems)")
      #expect(check.recounted.count == SQLiteMaintenance.recounts.count)

      // Restored in place of a copy of the source: every write acknowledged before the
      // backup began is there, and the pages read the same as the source's at that point.
      let restoredPath = directory + "/restored/live.sqlite"
      _ = try SQLiteMaintenance.restore(from: backupDirectory, database: restoredPath)
      let restored = try SQLiteStore(configuration: StoreConfiguration(path: restoredPath))
      for guid in before {
        #expect(try await restored.employee(guid: guid, fields: [.guid, .name]).guid == guid)
      }
      let restoredCount = try await restored.countEmployees(filter: EmployeeFilter())
      let sourceCount = try await store.countEmployees(filter: EmployeeFilter())
      #expect(
        restoredCount >= 170 && restoredCount <= sourceCount,
        "\(restoredCount) of \(sourceCount); \(writes) writes"
      )
      let page = try await restored.employeePage(
        fields: .all,
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 1000
      ).employees
      // Every employee in the copy is the source's, field for field (none is edited here).
      let source = Dictionary(
        uniqueKeysWithValues: try await store.employees(
          guids: page.map(\.guid),
          fields: [.guid, .name, .department]
        )
        .map { ($0.guid, $0) }
      )
      #expect(source.count == page.count)
      for employee in page {
        #expect(
          source[employee.guid]?.name == employee.name
            && source[employee.guid]?.department == employee.department
        )
      }
      print(
        "backup under \(writes) concurrent writes: \(restoredCount) of \(sourceCount) employees"
      )
      // Every picture the copy names reads back whole.
      for employee in page where employee.pictureEtag != nil {
        let bytes = try await restored.withPicture(guid: employee.guid) { _, reader in
          try await reader.read(offset: 0, count: 64 << 20)
        }
        #expect(bytes.count > 0)
      }
      #expect(try SQLiteMaintenance.check(database: restoredPath).isHealthy)
    }
  }

  @Test(
    "check finds a counter off its recount, a picture file damaged or gone, and a dangling picture"
  )
  func checkFindsDamage() async throws {
    try await Self.withDemoStore { store, directory, _ in
      let database = directory + "/live.sqlite"
      let backup = directory + "/backup"
      _ = try SQLiteMaintenance.backup(database: database, into: backup)
      let copy = "\(backup)/roster.sqlite"
      #expect(
        try SQLiteMaintenance.check(database: copy, picturesDirectory: "\(backup)/pictures")
          .isHealthy
      )

      try runSQL(
        copy,
        "UPDATE department_stats SET headcount = headcount + 1 WHERE department = (SELECT min(department) FROM department_stats)"
      )
      try runSQL(
        copy,
        "UPDATE sales_daily SET total_cents = total_cents + 1 WHERE (employee_id, day) = (SELECT employee_id, day FROM sales_daily LIMIT 1)"
      )
      let files = try FileManager.default.subpathsOfDirectory(atPath: "\(backup)/pictures")
        .filter { $0.split(separator: "/").last?.count == 64 }.sorted()
      #expect(files.count >= 2)
      // Hard links share their bytes with the server's files: damage copies, not them.
      let damaged = "\(backup)/pictures/\(files[0])"
      let bytes = try Data(contentsOf: URL(fileURLWithPath: damaged))
      try FileManager.default.removeItem(atPath: damaged)
      var flipped = bytes
      flipped[flipped.count / 2] ^= 0xFF
      try flipped.write(to: URL(fileURLWithPath: damaged))
      try FileManager.default.removeItem(atPath: "\(backup)/pictures/\(files[1])")
      try runSQL(
        copy,
        "UPDATE employees SET picture_etag = '\(String(repeating: "ab", count: 32))' WHERE rowid = 1"
      )

      let report = try SQLiteMaintenance.check(
        database: copy,
        picturesDirectory: "\(backup)/pictures"
      )
      let problems = report.problems.joined(separator: "\n")
      #expect(problems.contains("department_stats"), "\(problems)")
      #expect(problems.contains("sales_daily"), "\(problems)")
      #expect(problems.contains("damaged"), "\(problems)")
      #expect(problems.contains("has no file"), "\(problems)")
      #expect(problems.contains("name a picture with no row"), "\(problems)")
      // The source was never touched.
      #expect(try SQLiteMaintenance.check(database: database).isHealthy)

      // A damaged backup is not restored unless asked.
      #expect(throws: SQLiteMaintenance.Failure.self) {
        try SQLiteMaintenance.restore(from: backup, database: directory + "/elsewhere/x.sqlite")
      }
      _ = store
    }
  }

  @Test("restore refuses a database another process has open, and keeps what it replaces")
  func restoreRefusesAnOpenDatabase() async throws {
    try await Self.withDemoStore { store, directory, _ in
      let database = directory + "/live.sqlite"
      _ = try SQLiteMaintenance.backup(database: database, into: directory + "/backup")
      // Another process (the sqlite3 shell, as a server would) holds it open: locks are per
      // process, so this one's own connections would not show.
      let holder = Process()
      holder.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
      holder.arguments = [database]
      let input = Pipe()
      let output = Pipe()
      holder.standardInput = input
      holder.standardOutput = output
      try holder.run()
      input.fileHandleForWriting.write(Data("SELECT count(*) FROM employees;\n".utf8))
      _ = output.fileHandleForReading.availableData
      #expect(SQLiteMaintenance.isOpen(database))
      #expect(throws: SQLiteMaintenance.Failure.self) {
        try SQLiteMaintenance.restore(from: directory + "/backup", database: database)
      }
      try input.fileHandleForWriting.close()
      holder.waitUntilExit()
      #expect(!SQLiteMaintenance.isOpen(database))

      // Over a database no server has open: the old one is kept beside it.
      let other = directory + "/other/roster.sqlite"
      _ = try SQLiteMaintenance.restore(from: directory + "/backup", database: other)
      #expect(!SQLiteMaintenance.isOpen(other))
      _ = try SQLiteMaintenance.restore(from: directory + "/backup", database: other)
      let kept = try FileManager.default.contentsOfDirectory(atPath: directory + "/other")
      #expect(kept.contains { $0.hasPrefix("roster.sqlite.replaced-") }, "\(kept)")
    }
  }
}

/// Runs one statement on a database file, outside any store.
private func runSQL(_ database: String, _ sql: String) throws {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
  process.arguments = [database, sql]
  try process.run()
  process.waitUntilExit()
  #expect(process.terminationStatus == 0, "sqlite3 \(sql)")
}
