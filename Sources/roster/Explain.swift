import ArgumentParser
import Foundation
import RosterDomain
import RosterSQLite

/// `roster explain`: SQLite's plan for every query the store runs.
struct Explain: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Print the query plan of every store query, on a database."
  )

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Flag(help: "Run ANALYZE first, so the plans use table statistics.")
  var analyze = false

  @Flag(help: "Print the SQL text too.")
  var sql = false

  func run() throws {
    let store = try SQLiteStore(configuration: StoreConfiguration(path: self.db))
    let plans = try store.explainQueries(analyze: self.analyze)
    for query in plans {
      print(query.name)
      if self.sql {
        print("  SQL: " + query.sql.split(whereSeparator: \.isWhitespace).joined(separator: " "))
      }
      for line in query.plan { print("  " + line) }
    }
    let scans = plans.filter { $0.plan.contains(where: QueryPlan.scansEmployees) }
    print("\n\(plans.count) queries; \(scans.count) scan employees without an index")
  }
}
