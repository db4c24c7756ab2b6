import GRDB
import GRDBSQLite
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// Every list, count, search and point-read shape must be served by an index: no table scan
/// of `employees`, and no temp B-tree to sort. Checked before and after ANALYZE, since the
/// planner's choices change with statistics.
@Suite("Query plans", .timeLimit(.minutes(10)))
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
          for cursor in [
            nil, EmployeeCursor(keys: EmployeeSQL.sortKeys(order).map { _ in "m" }, id: 5),
          ] {
            for fields in [EmployeeFields.all, [.guid, .name]] {
              let query = EmployeeSQL.page(
                fields: fields,
                filter: filter,
                order: order,
                after: cursor,
                limit: 51
              )
              let plan = try Self.plan(store, query.sql, query.arguments)
              let context =
                "order \(order), \(filter), cursor \(cursor != nil):\n\(plan.joined(separator: "\n"))"
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

  @Test(
    "a name search reads its employees by name from the matching names",
    arguments: [false, true]
  )
  func searchPlans(analyzed: Bool) async throws {
    try await withTemporaryStore(employees: 2000) { store async throws in
      if analyzed { try store.write { db in try db.execute(sql: "ANALYZE") } }
      for order in EmployeeOrder.allCases {
        for filter in Self.filters where filter.nameContains != nil {
          for cursor in [
            nil, EmployeeCursor(keys: EmployeeSQL.sortKeys(order).map { _ in "m" }, id: 5),
          ] {
            // In name order always; in the others when the matches are few and get sorted.
            let query = EmployeeSQL.page(
              fields: .all,
              filter: filter,
              order: order,
              after: cursor,
              limit: 51,
              few: order != .name
            )
            let plan = try Self.plan(store, query.sql, query.arguments)
            let context =
              "order \(order), \(filter), cursor \(cursor != nil):\n\(plan.joined(separator: "\n"))"
            let main = plan.first { $0.hasPrefix("SEARCH e ") }
            #expect(main?.contains("name_folded=?") == true, "driven by the names: \(context)")
            #expect(
              plan.contains { $0.contains("TEMP B-TREE") } == (order != .name),
              "sorted only outside name order: \(context)"
            )
            #expect(
              plan.contains { $0.contains("employee_names_fts") || $0.contains("VIRTUAL TABLE") }
                == (filter.nameContains!.count >= 3),
              "the trigram index serves three characters or more: \(context)"
            )
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
      // LookupEmployee: through the address's index, in id order, with no sort.
      let lookup = try Self.plan(store, EmployeeSQL.byEmail(.all), ["a@example.com"])
      #expect(
        lookup.contains { $0.contains("SEARCH e USING INDEX employees_by_email") },
        "\(lookup)"
      )
      #expect(!lookup.contains { $0.contains("TEMP B-TREE") }, "\(lookup)")
    }
  }

  /// SQLite prepares a statement again after a new binding when the plan read the bound value
  /// (a bare `GLOB ?` does, for its LIKE optimization): a cached statement is then compiled on
  /// every call. A search's pages, counts and names must run as compiled.
  @Test("a name search's statements are compiled once, whatever the text")
  func searchesCompiledOnce() async throws {
    try await withTemporaryStore(employees: 200) { store async throws in
      for (first, second) in [("jos", "ann"), ("an", "jo")] {
        for base in Self.filters where base.nameContains != nil {
          var filters = (base, base)
          filters.0.nameContains = first
          filters.1.nameContains = second
          var shapes = EmployeeOrder.allCases.map { order in
            [filters.0, filters.1].map { filter in
              EmployeeSQL.page(fields: .all, filter: filter, order: order, after: nil, limit: 51)
            }
          }
          shapes.append([filters.0, filters.1].map(EmployeeSQL.count))
          shapes.append(
            [first, second].map { text in
              let names = EmployeeSQL.matchingNames(text)
              return (names.sql, StatementArguments(names.arguments))
            }
          )
          for shape in shapes {
            #expect(shape[0].sql == shape[1].sql)
            let reprepared = try store.read { db in
              let statement = try db.cachedStatement(sql: shape[0].sql)
              for query in shape + shape {
                _ = try Row.fetchAll(statement, arguments: query.arguments)
              }
              return sqlite3_stmt_status(statement.sqliteStatement, SQLITE_STMTSTATUS_REPREPARE, 0)
            }
            #expect(reprepared == 0, "\(shape[0].sql)")
          }
        }
      }
    }
  }

  /// No line may scan `employees` without an index.
  static func expectIndexed(_ plan: [String], context: String) {
    for line in plan {
      #expect(!QueryPlan.scansEmployees(line), "table scan: \(context)")
    }
  }

  static func plan(
    _ store: SQLiteStore,
    _ sql: String,
    _ arguments: StatementArguments
  ) throws -> [String] {
    try store.read { db in
      try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments)
        .map { $0["detail"] as String }
    }
  }
}

/// Every analytics query: counters and rollups are read by key, raw sales only through an
/// index unless nothing filters them, and COUNT, SUM and AVG over whole months never touch
/// raw sales at all.
@Suite("Analytics query plans", .timeLimit(.minutes(10)))
struct AnalyticsQueryPlanTests {
  /// True when a plan line is `verb` of table alias `alias` (not of a table whose name
  /// merely starts with it).
  static func reads(_ verb: String, _ alias: String, _ line: String) -> Bool {
    line == "\(verb) \(alias)" || line.hasPrefix("\(verb) \(alias) ")
  }

  static let filters: [SalesFilter] = [
    SalesFilter(),
    SalesFilter(department: "Sales"),
    SalesFilter(employeeGUID: "00000000-0000-4000-8000-000000000000"),
    SalesFilter(fromDate: "2021-03-01", toDate: "2022-06-30"),
    SalesFilter(fromDate: "2021-03-05", toDate: "2021-03-20"),
    SalesFilter(department: "Sales", fromDate: "2021-01-01", toDate: "2021-12-31"),
  ]

  @Test("aggregates, counters and calendars use their indexes", arguments: [false, true])
  func plans(analyzed: Bool) async throws {
    try await withTemporaryStore(employees: 500) { store async throws in
      if analyzed { try store.write { db in try db.execute(sql: "ANALYZE") } }
      for function in AggregateFunction.allCases {
        for grouping in AggregateGrouping.allCases where grouping != .active {
          for filter in Self.filters {
            let query = try AnalyticsSQL.aggregateSales(function, grouping, filter)
            let plan = try QueryPlanTests.plan(store, query.sql, query.arguments)
            let context = "\(function) by \(grouping), \(filter):\n\(plan.joined(separator: "\n"))"
            QueryPlanTests.expectIndexed(plan, context: context)
            let unfiltered =
              filter.department == nil && filter.employeeGUID == nil
              && filter.fromDate == nil
            for line in plan where Self.reads("SCAN", "s", line) {
              #expect(
                unfiltered || line.contains("INDEX"),
                "a filtered aggregate scans sales: \(context)"
              )
            }
            let wholeMonths = filter.fromDate != "2021-03-05"
            if AnalyticsSQL.additive.contains(function) && wholeMonths
              && (filter.employeeGUID != nil
                ? grouping != .department : grouping != .employee && grouping != .day)
            {
              #expect(
                !plan.contains { Self.reads("SCAN", "s", $0) || Self.reads("SEARCH", "s", $0) },
                "served by the rollups, not raw sales: \(context)"
              )
            }
          }
        }
        for grouping in [AggregateGrouping.none, .department, .active] {
          let key = grouping == .none ? "''" : grouping == .department ? "e.department" : "e.active"
          for filter in [
            EmployeeFilter(department: "Sales"), EmployeeFilter(active: true, nameContains: "jo"),
          ] {
            let query = AnalyticsSQL.aggregateEmployees(function, key: key, filter)
            let plan = try QueryPlanTests.plan(store, query.sql, query.arguments)
            QueryPlanTests.expectIndexed(
              plan,
              context: "\(function) by \(grouping), \(filter): \(plan)"
            )
          }
        }
      }
      let keyed: [(String, StatementArguments, String)] = [
        (AnalyticsSQL.department, ["Sales"], "SEARCH department_stats USING PRIMARY KEY"),
        (
          AnalyticsSQL.employeeSales, ["x"],
          "SEARCH employees USING INDEX sqlite_autoindex_employees"
        ),
        (AnalyticsSQL.employeeMonths, [1], "SEARCH sales_daily USING PRIMARY KEY"),
        (
          AnalyticsSQL.departmentMonths, ["Sales"],
          "SEARCH sales_monthly_department USING PRIMARY KEY"
        ),
        (AnalyticsSQL.monthVersion, ["2024-03"], "SEARCH sales_monthly USING PRIMARY KEY"),
        (
          AnalyticsSQL.employeeDays, [1, "2024-03-01", "2024-03-31"],
          "SEARCH sales_daily USING PRIMARY KEY"
        ),
        (
          AnalyticsSQL.departmentDays, ["2024-03-01", "2024-03-31", "Sales"],
          "SEARCH sales_daily_department USING PRIMARY KEY"
        ),
        (
          AnalyticsSQL.everyoneDays, ["2024-03-01", "2024-03-31"],
          "SEARCH sales_daily_department USING PRIMARY KEY"
        ),
        (
          SQLiteStore.bucketAmount(inDepartment: false),
          [31_000, 31_999, "2020-01-01", "2024-12-31", 10],
          "SEARCH s USING COVERING INDEX sales_by_amount (amount_cents>? AND amount_cents<?)"
        ),
        (
          SQLiteStore.bucketAmount(inDepartment: true),
          [31_000, 31_999, "2020-01-01", "2024-12-31", "Sales", 10],
          "SEARCH s USING COVERING INDEX sales_by_amount (amount_cents>? AND amount_cents<?)"
        ),
      ]
      for (sql, arguments, expected) in keyed {
        let plan = try QueryPlanTests.plan(store, sql, arguments)
        #expect(plan.contains { $0.contains(expected) }, "\(sql)\n\(plan.joined(separator: "\n"))")
      }
      // The two whole-table reads are of small tables, one row per department or per month,
      // each in key order with no sort.
      for (sql, table) in [
        (AnalyticsSQL.departments, "department_stats"),
        (AnalyticsSQL.everyoneMonths, "sales_monthly"),
      ] {
        let plan = try QueryPlanTests.plan(store, sql, [])
        #expect(plan == ["SCAN \(table)"], "\(sql)")
      }
    }
  }
}

@Suite("roster explain", .timeLimit(.minutes(10)))
struct ExplainTests {
  @Test("the catalog plans every kind of store query, and none scans employees without an index")
  func catalog() async throws {
    try await withTemporaryStore(employees: 300) { store async throws in
      let plans = try store.explainQueries(analyze: true)
      let names = plans.map(\.name)
      for kind in [
        "ListEmployees", "CountEmployees", "GetEmployee", "DepartmentHeadcounts",
        "DepartmentSummary",
        "EmployeeSales", "SalesCalendar", "AggregateSales", "AggregateEmployees",
      ] {
        #expect(names.contains { $0.hasPrefix(kind) }, "\(kind) missing")
      }
      #expect(plans.allSatisfy { !$0.plan.isEmpty })
      for query in plans {
        QueryPlanTests.expectIndexed(query.plan, context: "\(query.name): \(query.plan)")
      }
    }
  }
}
