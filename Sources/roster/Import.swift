import ArgumentParser
import Foundation
import RosterDomain
import RosterPostgres
import RosterSQLite
import RosterSeed
import RosterStore

/// `roster import`: loads a seed.json file into the database, offline, in large batches.
struct Import: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Load a seed.json file into the database (merging by guid)."
  )

  @Argument(help: "The seed.json file to load.")
  var file: String

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Option(
    help: "Load into this PostgreSQL database instead of the SQLite file (env ROSTER_POSTGRES_URL)."
  )
  var postgres: String? = ProcessInfo.processInfo.environment["ROSTER_POSTGRES_URL"]

  @Option(help: "The PostgreSQL schema (with --postgres).")
  var postgresSchema: String = "roster"

  @Option(help: "Rows per transaction.")
  var chunkRows: Int = 20_000

  @Option(help: "The author recorded in the change log.")
  var author: String = "import"

  @Option(help: "Where the files named by `picture` are (default: pictures beside the file).")
  var picturesDir: String?

  @Option(
    help: "The sales to load after the employees (default: sales.csv beside the file, if present)."
  )
  var sales: String?

  func validate() throws {
    if self.chunkRows < 1 { throw ValidationError("--chunk-rows must be at least 1") }
    if let sales = self.sales, !FileManager.default.fileExists(atPath: sales) {
      throw ValidationError("--sales \(sales): no such file")
    }
  }

  func run() async throws {
    guard let url = self.postgres else {
      var configuration = StoreConfiguration(path: self.db)
      configuration.mmapSize = StoreConfiguration.offlineMmapSize
      let store = try SQLiteStore(configuration: configuration)
      try await self.load(
        into: store,
        pictureConcurrency: store.configuration.pictures.thumbnailConcurrency
      )
      return
    }
    var configuration = PostgresConfiguration(url: try PostgresURL(url))
    configuration.schema = self.postgresSchema
    try await PostgresStore.withOffline(configuration, label: "roster.import") { store in
      try await self.load(
        into: store,
        pictureConcurrency: configuration.pictures.thumbnailConcurrency
      )
    }
  }

  private func load(into store: some StoreBackend, pictureConcurrency: Int) async throws {
    let source = SeedFileSource(
      file: self.file,
      picturesDirectory: self.picturesDir,
      salesFile: self.sales
    )
    let loader = DirectoryLoader(
      context: WriteContext(author: self.author),
      employeeChunkRows: self.chunkRows,
      pictureConcurrency: pictureConcurrency,
      progress: .standardError
    )
    let report = try await loader.load(source, into: store)
    let summary = report.employees
    print(
      "imported \(summary.imported) employees in \(Self.seconds(report.employeesTime)) s "
        + "(\(Self.rate(summary.imported, report.employeesTime)) rows/s), "
        + "inserted \(summary.inserted), updated \(summary.updated), "
        + "rejected \(summary.rejectedCount)"
    )
    for rejection in summary.rejected.prefix(20) {
      print("  record \(rejection.index): \(rejection.reason)")
    }
    if report.picturesStored + report.picturesRefusedCount > 0 {
      print(
        "stored \(report.picturesStored) pictures in \(report.picturesTime), refused \(report.picturesRefusedCount)"
      )
      for (guid, reason) in report.picturesRefused.prefix(20) {
        print("  picture of \(guid): \(reason)")
      }
    }
    if let sales = report.sales {
      let inserted = sales.inserted
      print(
        "imported \(inserted) sales in \(Self.seconds(report.salesTime)) s "
          + "(\(Self.rate(inserted, report.salesTime)) rows/s), rejected \(sales.rejectedCount)"
      )
      for rejection in sales.rejected.prefix(20) {
        print("  sale \(rejection.index): \(rejection.reason)")
      }
    }
    print("built indexes, counters and rollups in \(Self.seconds(report.rebuildTime)) s")
  }

  private static func seconds(_ duration: Duration) -> String {
    String(format: "%.2f", duration.seconds)
  }

  private static func rate(_ count: Int, _ duration: Duration) -> Int {
    Int(Double(count) / max(duration.seconds, 1e-9))
  }
}
