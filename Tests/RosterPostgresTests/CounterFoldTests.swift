import PostgresNIO
import RosterDomain
import RosterStore
import TestSupport
import Testing

@testable import RosterPostgres

/// The counters kept as delta rows (`name_counts`, `department_counts`) are folded by the
/// maintenance: only where deltas wait, so a quiet store's maintenance rewrites no row.
@Suite("PostgreSQL counter folds", .timeLimit(.minutes(10)), .enabled(if: PostgresTesting.enabled))
struct CounterFoldTests {
  @Test("a fold rewrites only the names and departments with deltas, and keeps the counts")
  func foldsOnlyDeltas() async throws {
    try await PostgresTesting.withStore { store in
      let names = ["Ana Lima", "Bruno Sá", "Carla Dias", "Dora Reis"]
      let made = (0 ..< 40).map {
        makeEmployee(name: names[$0 % names.count], department: ["Sales", "Design"][$0 % 2])
      }
      _ = try await store.importEmployees(made, chunkRows: 10)
      try await Self.foldAll(store)
      let names1 = try await Self.places(store, "name_counts", "name_folded")
      let departments1 = try await Self.places(store, "department_counts", "department")
      #expect(names1.count == 4 && departments1.count == 2, "\(names1) \(departments1)")

      // Nothing changed: nothing is rewritten.
      try await Self.foldAll(store)
      #expect(try await Self.places(store, "name_counts", "name_folded") == names1)
      #expect(try await Self.places(store, "department_counts", "department") == departments1)

      // One rename and one move: their keys are folded again, the others stay where they are.
      var changes = EmployeeChanges()
      changes.name = "Ana Lima"
      changes.department = "Sales"
      _ = try await store.updateEmployee(
        guid: made[1].guid,
        changes: changes,
        context: WriteContext()
      )
      try await Self.foldAll(store)
      let names2 = try await Self.places(store, "name_counts", "name_folded")
      #expect(Set(names2.keys) == Set(names1.keys))
      #expect(
        names2["carla dias"] == names1["carla dias"] && names2["dora reis"] == names1["dora reis"]
      )
      #expect(names2["ana lima"] != names1["ana lima"] && names2["bruno sa"] != names1["bruno sa"])
      let counted = try await store.rows(
        "SELECT name_folded || '=' || employees FROM name_counts ORDER BY name_folded"
      ).map { try $0[0].decode(String.self) }
      #expect(
        counted == ["ana lima=11", "bruno sa=9", "carla dias=10", "dora reis=10"],
        "\(counted)"
      )
      let departments = try await store.departmentCounts().map {
        "\($0.department)=\($0.headcount)"
      }
      #expect(departments == ["Design=19", "Sales=21"], "\(departments)")
    }
  }

  @Test("a bulk load ends with the counters tables rewritten; a busy table is only vacuumed")
  func foldOfManyRewrites() async throws {
    try await PostgresTesting.withStore { store in
      // A rewrite gives a table new files (how compact they are depends on the snapshots of
      // the whole database: the parallel suites' transactions keep the deltas' dead rows).
      let before = try await Self.files(store, ["name_counts", "department_counts"])
      let names = ["Ana Lima", "Bruno Sá", "Carla Dias", "Dora Reis"]
      let made = (0 ..< 12_000).map {
        makeEmployee(name: names[$0 % names.count], department: ["Sales", "Design"][$0 % 2])
      }
      // As `roster import` loads: its end folds and rewrites, whatever the maintenance folded
      // meanwhile, waiting out an autovacuum that the deltas called to the table.
      _ = try await store.withBulkLoad { try await store.importEmployees(made, chunkRows: 2_000) }
      let after = try await Self.files(store, ["name_counts", "department_counts"])
      #expect(
        after["name_counts"] != before["name_counts"]
          && after["department_counts"] != before["department_counts"],
        "not rewritten: \(before) \(after)"
      )
      #expect(
        try await Self.counted(store) == [
          "ana lima=3000", "bruno sa=3000", "carla dias=3000", "dora reis=3000",
        ]
      )

      // More deltas than the maintenance rewrites after (10,000), while a reader holds the
      // table (a transaction that read it): the rewrite waits 200 ms (`afterManyDeltas`) for
      // its lock, then the table is only vacuumed, and the fold ends with the right counts.
      _ = try await store.importEmployees(
        (0 ..< 12_000).map { makeEmployee(name: names[$0 % names.count]) },
        chunkRows: 2_000
      )
      let reader = try await PostgresTesting.connect(store.configuration)
      _ = try await reader.query("BEGIN", logger: PostgresTesting.logger)
      _ = try await reader.query("SELECT count(*) FROM name_counts", logger: PostgresTesting.logger)
      try await store.compactCounters()
      _ = try await reader.query("COMMIT", logger: PostgresTesting.logger)
      try await reader.close()
      let busy = try await Self.files(store, ["name_counts"])
      #expect(busy["name_counts"] == after["name_counts"], "the busy table was rewritten")
      #expect(
        try await Self.counted(store) == [
          "ana lima=6000", "bruno sa=6000", "carla dias=6000", "dora reis=6000",
        ]
      )
    }
  }

  /// Folds until every key has one row. The store's maintenance folds too, at its start and
  /// then every minute, and while it holds the fold's lock a `compactCounters` folds nothing.
  static func foldAll(_ store: PostgresStore) async throws {
    let folded = try await eventually {
      try await store.compactCounters()
      return try await store.row(
        """
        SELECT (SELECT count(*) = count(DISTINCT name_folded) FROM name_counts)
          AND (SELECT count(*) = count(DISTINCT department) FROM department_counts)
        """
      )?[0].decode(Bool.self) == true
    }
    #expect(folded, "a key kept more than one row")
  }

  /// Each table's file (`relfilenode`), which a rewrite changes.
  static func files(_ store: PostgresStore, _ tables: [String]) async throws -> [String: Int64] {
    var files: [String: Int64] = [:]
    for table in tables {
      files[table] = try await store.row(
        "SELECT pg_relation_filenode(\(table)::regclass)::int8"
      )?[0].decode(Int64.self)
    }
    return files
  }

  static func counted(_ store: PostgresStore) async throws -> [String] {
    try await store.rows(
      "SELECT name_folded || '=' || employees FROM name_counts ORDER BY name_folded"
    ).map { try $0[0].decode(String.self) }
  }

  /// Each key's one row, by where it lies in the table (`ctid`): a rewritten row moves.
  static func places(
    _ store: PostgresStore,
    _ table: String,
    _ key: String
  ) async throws
    -> [String: String]
  {
    let rows = try await store.rows(
      PostgresQuery(unsafeSQL: "SELECT \(key), ctid::text FROM \(table)")
    )
    var places: [String: String] = [:]
    for row in rows {
      let name = try row[0].decode(String.self)
      let place = try row[1].decode(String.self)
      #expect(places.updateValue(place, forKey: name) == nil, "two rows for \(name) in \(table)")
    }
    return places
  }
}
