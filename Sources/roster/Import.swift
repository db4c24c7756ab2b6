import ArgumentParser
import Foundation
import RosterStore

/// `roster import`: loads a seed.json file into the database, in large batches.
struct Import: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Load a seed.json file into the database (merging by guid)."
  )

  @Argument(help: "The seed.json file to load.")
  var file: String

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  func run() throws {
    let store = try RosterStore(configuration: StoreConfiguration(path: self.db))
    let started = ContinuousClock.now
    var records: [Employee] = []
    records.reserveCapacity(RosterStore.importBatchSize)
    var summary = ImportSummary()
    var offset = 0
    func flush() throws {
      var part = try store.importEmployees(records)
      for index in part.rejected.indices { part.rejected[index].index += offset }
      summary.imported += part.imported
      summary.rejected += part.rejected
      offset += records.count
      records.removeAll(keepingCapacity: true)
    }
    try store.withBulkLoad {
      try SeedFile.read(self.file) { record in
        records.append(record.employee)
        if records.count == RosterStore.importBatchSize { try flush() }
      }
      try flush()
    }
    let elapsed = ContinuousClock.now - started
    let seconds = Double(elapsed.components.seconds)
      + Double(elapsed.components.attoseconds) / 1e18
    print(
      "imported \(summary.imported) employees in \(String(format: "%.2f", seconds)) s "
        + "(\(Int(Double(summary.imported) / max(seconds, 1e-9))) rows/s), "
        + "rejected \(summary.rejected.count)"
    )
    for rejection in summary.rejected.prefix(20) {
      print("  record \(rejection.index): \(rejection.reason)")
    }
  }
}
