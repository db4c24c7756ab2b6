import ArgumentParser
import Foundation
import RosterSQLite
import RosterDomain
import RosterSeed

/// `roster import`: loads a seed.json file into the database, offline, in large batches.
struct Import: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Load a seed.json file into the database (merging by guid)."
  )

  @Argument(help: "The seed.json file to load.")
  var file: String

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Option(help: "Rows per transaction.")
  var chunkRows: Int = 20_000

  @Option(help: "The author recorded in the change log.")
  var author: String = "import"

  @Option(help: "Where the files named by `picture` are (default: pictures beside the file).")
  var picturesDir: String?

  @Option(help: "The sales to load after the employees (default: sales.csv beside the file, if present).")
  var sales: String?

  func validate() throws {
    if self.chunkRows < 1 { throw ValidationError("--chunk-rows must be at least 1") }
  }

  func run() async throws {
    let store = try SQLiteStore(configuration: StoreConfiguration(path: self.db))
    let started = ContinuousClock.now
    let summary = try await store.withBulkLoad {
      try await store.upsertEmployees(
        try SeedFile.batches(self.file),
        context: WriteContext(author: self.author),
        chunkRows: self.chunkRows
      )
    }
    let seconds = (ContinuousClock.now - started).seconds
    print(
      "imported \(summary.imported) employees in \(String(format: "%.2f", seconds)) s "
        + "(\(Int(Double(summary.imported) / max(seconds, 1e-9))) rows/s), "
        + "inserted \(summary.inserted), updated \(summary.updated), "
        + "rejected \(summary.rejected.count)"
    )
    for rejection in summary.rejected.prefix(20) {
      print("  record \(rejection.index): \(rejection.reason)")
    }
    let directory = self.picturesDir ?? SeedFile.picturesDirectory(beside: self.file)
    var pictures: [(guid: String, path: String)] = []
    try SeedFile.read(self.file) { record in
      if let name = record.picture, let guid = EmployeeValidation.canonicalGUID(record.employee.guid) {
        pictures.append((guid, SeedFile.picturePath(name, in: directory)))
      }
    }
    if !pictures.isEmpty {
      let pictureStart = ContinuousClock.now
      let (stored, refused) = try await store.importPictures(
        pictures,
        context: WriteContext(author: self.author)
      )
      print("stored \(stored) pictures in \(ContinuousClock.now - pictureStart), refused \(refused.count)")
      for (guid, reason) in refused.prefix(20) { print("  picture of \(guid): \(reason)") }
    }
    let salesPath = self.sales ?? SalesFile.path(beside: self.file)
    if self.sales != nil || FileManager.default.fileExists(atPath: salesPath) {
      let salesStart = ContinuousClock.now
      let (inserted, rejected) = try await store.importSales(
        try SalesFile.batches(salesPath),
        context: WriteContext(author: self.author)
      )
      let seconds = (ContinuousClock.now - salesStart).seconds
      print(
        "imported \(inserted) sales in \(String(format: "%.2f", seconds)) s "
          + "(\(Int(Double(inserted) / max(seconds, 1e-9))) rows/s), rejected \(rejected.count)"
      )
      for rejection in rejected.prefix(20) { print("  sale \(rejection.index): \(rejection.reason)") }
    }
  }
}
