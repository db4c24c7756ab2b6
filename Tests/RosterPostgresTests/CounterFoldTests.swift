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
      try await store.compactNameCounts()
      try await store.compactDepartmentCounts()
      let names1 = try await Self.places(store, "name_counts", "name_folded")
      let departments1 = try await Self.places(store, "department_counts", "department")
      #expect(names1.count == 4 && departments1.count == 2, "\(names1) \(departments1)")

      // Nothing changed: nothing is rewritten.
      try await store.compactNameCounts()
      try await store.compactDepartmentCounts()
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
      try await store.compactNameCounts()
      try await store.compactDepartmentCounts()
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
