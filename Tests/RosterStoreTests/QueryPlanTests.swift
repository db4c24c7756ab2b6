import GRDB
import Testing
import TestSupport

@testable import RosterStore

/// Every list, count, search and point-read shape must be served by an index: no table scan
/// of `employees`, and no temp B-tree to sort. Checked before and after ANALYZE, since the
/// planner's choices change with statistics.
@Suite("Query plans")
struct QueryPlanTests {
  static let filters: [EmployeeFilter] = [nil, "Sales"].flatMap { department in
    [nil, true, false].flatMap { active in
      [nil, "jos", "an"].map { name in
        EmployeeFilter(department: department, active: active, nameContains: name)
      }
    }
  }

  @Test("list pages use an index range, never a scan or a sort", arguments: [false, true])
  func listPlans(analyzed: Bool) async throws {
    try await withTemporaryStore(employees: 2000) { store async throws in
      if analyzed { try store.write { db in try db.execute(sql: "ANALYZE") } }
      for order in EmployeeOrder.allCases {
        for filter in Self.filters {
          for cursor in [nil, EmployeeCursor(keys: EmployeeSQL.sortKeys(order).map { _ in "m" }, id: 5)] {
            for fields in [EmployeeFields.all, [.guid, .name]] {
              let query = EmployeeSQL.page(
                fields: fields, filter: filter, order: order, after: cursor, limit: 51
              )
              let plan = try Self.plan(store, query.sql, query.arguments)
              let context = "order \(order), \(filter), cursor \(cursor != nil):\n\(plan.joined(separator: "\n"))"
              Self.expectIndexed(plan, context: context)
              #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(context)")
              let main = plan.first { $0.hasPrefix("SEARCH e ") || $0.hasPrefix("SCAN e ") }
              if filter.department != nil || filter.active != nil || cursor != nil {
                #expect(main?.hasPrefix("SEARCH e ") == true, "a range, not a walk: \(context)")
              }
              #expect(
                plan.contains { $0.hasPrefix("SEARCH t ") } == fields.contains(.thumbnail),
                "thumbnails are read only when asked for: \(context)"
              )
            }
          }
        }
      }
    }
  }

  @Test("counts and point reads use an index", arguments: [false, true])
  func countPlans(analyzed: Bool) async throws {
    try await withTemporaryStore(employees: 2000) { store async throws in
      if analyzed { try store.write { db in try db.execute(sql: "ANALYZE") } }
      for filter in Self.filters {
        let query = EmployeeSQL.count(filter)
        let plan = try Self.plan(store, query.sql, query.arguments)
        Self.expectIndexed(plan, context: "count \(filter): \(plan)")
      }
      let point = try Self.plan(store, EmployeeSQL.select(.all) + " WHERE e.guid = ?", ["x"])
      #expect(point.contains { $0.contains("SEARCH e USING INDEX sqlite_autoindex_employees") })
    }
  }

  /// No line may scan `employees` without an index.
  static func expectIndexed(_ plan: [String], context: String) {
    for line in plan where line.hasPrefix("SCAN e") || line.hasPrefix("SCAN employees ") {
      #expect(line.contains("INDEX"), "table scan: \(context)")
    }
  }

  static func plan(
    _ store: RosterStore,
    _ sql: String,
    _ arguments: StatementArguments
  ) throws -> [String] {
    try store.read { db in
      try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments)
        .map { $0["detail"] as String }
    }
  }
}
