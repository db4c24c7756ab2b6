import Foundation
import GRDB
import RosterDomain
import RosterSeed
import TestSupport
import Testing

@testable import RosterSQLite

/// A bulk load into empty tables drops the indexes and triggers of `employees` and `sales`
/// and counts what the triggers keep once at the end: the result must be what the triggers
/// keep row by row.
@Suite("SQLite bulk loads", .timeLimit(.minutes(10)))
struct SQLiteBulkLoadTests {
  @Test(
    "a bulk load ends with the counters, rollups, indexes and triggers the row-by-row writes keep"
  )
  func bulkEqualsTriggers() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let source = DemoSource(
      demo: DemoData(count: 300, pictures: false),
      pictureScratch: nil,
      salesPerEmployee: 5
    )
    let loaded = try SQLiteStore(
      configuration: StoreConfiguration(path: directory + "/bulk.sqlite")
    )
    _ = try await DirectoryLoader(context: WriteContext(author: "test")).load(source, into: loaded)
    let written = try SQLiteStore(
      configuration: StoreConfiguration(path: directory + "/rows.sqlite")
    )
    _ = try await written.upsertEmployees(try source.employees(), chunkRows: nil)
    _ = try await written.importSales(try source.sales()!, chunkRows: nil)

    let built = try Self.derived(directory + "/bulk.sqlite")
    let kept = try Self.derived(directory + "/rows.sqlite")
    #expect(built.keys.sorted() == kept.keys.sorted())
    for (what, rows) in kept {
      #expect(!rows.isEmpty, "\(what) is empty: the comparison proves nothing")
      #expect(built[what] == rows, "\(what) differs")
    }
    #expect(try SQLiteMaintenance.check(database: directory + "/bulk.sqlite").isHealthy)
  }

  /// Every counter and rollup, keyed by guid rather than row id, and the schema of the loaded
  /// tables, each as sorted lines.
  static func derived(_ path: String) throws -> [String: [String]] {
    let queue = try DatabaseQueue(path: path)
    defer { try? queue.close() }
    var queries = BulkLoadOracle.sharedQueries
    queries["monthly sales"] =
      "SELECT month || ' ' || version || ' ' || count || ' ' || total_cents FROM sales_monthly"
    queries["names"] = "SELECT name_folded || ' ' || employees || ' ' || active FROM employee_names"
    queries["schema"] = """
      SELECT type || ' ' || name || ' ' || sql FROM sqlite_master
      WHERE tbl_name IN ('employees', 'sales') AND sql IS NOT NULL
      """
    return try queue.read { db in
      try queries.mapValues { try String.fetchAll(db, sql: $0).sorted() }
    }
  }
}
