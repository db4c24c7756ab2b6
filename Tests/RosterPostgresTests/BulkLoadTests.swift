import PostgresNIO
import RosterDomain
import RosterSeed
import RosterStore
import TestSupport
import Testing

@testable import RosterPostgres

/// A bulk load into empty tables takes away what derives from the rows and builds it once at
/// the end (`BulkLoad`): the result must be what the triggers keep row by row, and a load that
/// stopped half-way is finished by the next start.
@Suite("PostgreSQL bulk loads", .timeLimit(.minutes(10)), .enabled(if: PostgresTesting.enabled))
struct BulkLoadTests {
  /// The demo directory: employees with several sales each, over several departments.
  static let demo = DemoData(count: 300, pictures: false)

  @Test(
    "a bulk load ends with the counters, rollups, indexes and triggers the row-by-row writes keep"
  )
  func bulkEqualsTriggers() async throws {
    let bare = try PostgresTesting.configuration()
    let triggered = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(triggered) { store in
      // The rows written as a server writes them: the triggers keep every counter.
      let source = DemoSource(demo: Self.demo, pictureScratch: nil, salesPerEmployee: 5)
      _ = try await store.upsertEmployees(
        try source.employees(),
        context: WriteContext(author: "test"),
        chunkRows: nil
      )
      _ = try await store.importSales(
        try source.sales()!,
        context: WriteContext(author: "test"),
        chunkRows: nil
      )
      let written = try await Self.derived(triggered)
      try await PostgresTesting.withStore(bare) { loaded in
        _ = try await DirectoryLoader(context: WriteContext(author: "test")).load(
          DemoSource(demo: Self.demo, pictureScratch: nil, salesPerEmployee: 5),
          into: loaded
        )
        let pending = try await loaded.rows("SELECT count(*) FROM bulk_load_pending")
        #expect(try pending.first?[0].decode(Int64.self) == 0, "the journal is left")
        let built = try await Self.derived(bare)
        #expect(built.keys.sorted() == written.keys.sorted())
        for (what, rows) in written {
          #expect(!rows.isEmpty, "\(what) is empty: the comparison proves nothing")
          #expect(built[what] == rows, "\(what) differs")
        }
      }
    }
  }

  @Test(
    "a bulk load that stopped before its end is finished by the next start, not under a running one"
  )
  func stoppedLoadFinishedAtStart() async throws {
    let configuration = try PostgresTesting.configuration()
    defer { Task { try? await PostgresTesting.dropSchema(configuration) } }
    let source = DemoSource(demo: Self.demo, pictureScratch: nil, salesPerEmployee: 5)
    let store = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    // The load's start and its rows, then the process "dies": no finish.
    try await PostgresTesting.running(store) { store in
      let connection = try await PostgresTesting.connect(configuration)
      let bare = try await BulkLoad.begin(on: connection, logger: PostgresTesting.logger)
      try await connection.close()
      #expect(bare)
      _ = try await store.upsertEmployees(
        try source.employees(),
        context: WriteContext(author: "test"),
        chunkRows: 100
      )
      _ = try await store.importSales(
        try source.sales()!,
        context: WriteContext(author: "test"),
        chunkRows: 500
      )
    }
    #expect(try await Self.pending(configuration) > 0)
    #expect(
      try await Self.indexes(configuration) == [
        "employees_guid_key", "employees_pkey", "sales_pkey",
      ],
      "only the keys the load needs are kept"
    )
    #expect(try await Self.salesCounted(configuration) == 0, "the triggers ran during the load")

    // A start while another process holds the load's lock leaves the journal to it.
    let holder = try await PostgresTesting.connect(configuration)
    _ = try await holder.query(BulkLoad.lock, logger: PostgresTesting.logger)
    _ = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    #expect(try await Self.pending(configuration) > 0, "finished under a running load")
    try await holder.close()

    // The next start finishes it, and logs the load as one gap past the log's end, from which
    // a watcher that starts then follows on.
    let logged =
      try await PostgresTesting.query(configuration, "SELECT last_seq FROM change_log_state")
      .first?.decode(Int64.self) ?? -1
    let next = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    #expect(next.latestChange == logged + 1)
    let tail = try await PostgresTesting.running(next) { next in
      try await next.changes(after: next.latestChange, limit: 10)
    }
    #expect(tail.isEmpty)
    #expect(try await Self.pending(configuration) == 0)
    #expect(try await Self.indexes(configuration).count == 18)
    #expect(try await Self.salesCounted(configuration) > 0)
    let wrong = try await PostgresTesting.query(
      configuration,
      """
      SELECT count(*) FROM employees e
      WHERE e.sales_count <> (SELECT count(*) FROM sales s WHERE s.employee_id = e.id)
      """
    )
    #expect(try wrong.first?.decode(Int64.self) == 0, "sales counters wrong after the rebuild")
    let triggers = try await PostgresTesting.query(
      configuration,
      """
      SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgenabled = 'D'
        AND tgrelid IN ('employees'::regclass, 'sales'::regclass)
      """
    )
    #expect(try triggers.first?.decode(Int64.self) == 0, "triggers left disabled")
  }

  /// What derives from the rows, keyed by guid rather than row id, each as sorted lines; and
  /// the schema's indexes and enabled triggers on the loaded tables.
  static func derived(_ configuration: PostgresConfiguration) async throws -> [String: [String]] {
    var queries = BulkLoadOracle.sharedQueries
    queries["monthly sales"] =
      "SELECT month || ' ' || count || ' ' || total_cents FROM sales_monthly"
    queries["names"] = """
      SELECT name_folded || ' ' || sum(employees) || ' ' || sum(active) FROM name_counts
      GROUP BY name_folded HAVING sum(employees) > 0
      """
    queries["indexes"] = """
      SELECT replace(indexdef, '\(configuration.schema).', '') FROM pg_indexes
      WHERE schemaname = '\(configuration.schema)'
      """
    queries["constraints"] = """
      SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
      WHERE connamespace = '\(configuration.schema)'::regnamespace
      """
    queries["triggers"] = """
      SELECT tgrelid::regclass || ' ' || tgname || ' ' || tgenabled::text FROM pg_trigger
      WHERE NOT tgisinternal AND tgrelid IN ('employees'::regclass, 'sales'::regclass)
      """
    var found: [String: [String]] = [:]
    for (what, sql) in queries {
      found[what] = try await PostgresTesting.query(configuration, sql)
        .map { try $0.decode(String.self) }.sorted()
    }
    return found
  }

  static func pending(_ configuration: PostgresConfiguration) async throws -> Int64 {
    try await PostgresTesting.query(configuration, "SELECT count(*) FROM bulk_load_pending")
      .first?.decode(Int64.self) ?? -1
  }

  static func indexes(_ configuration: PostgresConfiguration) async throws -> [String] {
    try await PostgresTesting.query(
      configuration,
      """
      SELECT indexname FROM pg_indexes
      WHERE schemaname = '\(configuration.schema)' AND tablename IN ('employees', 'sales') ORDER BY 1
      """
    ).map { try $0.decode(String.self) }
  }

  static func salesCounted(_ configuration: PostgresConfiguration) async throws -> Int64 {
    try await PostgresTesting.query(configuration, "SELECT sum(sales_count)::int8 FROM employees")
      .first?.decode(Int64?.self) ?? 0
  }
}
