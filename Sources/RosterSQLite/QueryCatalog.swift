internal import GRDB
internal import RosterDomain

/// One store query with SQLite's plan for it.
public struct QueryPlan: Sendable {
  /// What the query serves, e.g. "ListEmployees by name, department=Sales".
  public var name: String
  /// The SQL text, as the store runs it.
  public var sql: String
  /// `EXPLAIN QUERY PLAN`'s lines.
  public var plan: [String]

  /// Whether a plan line scans `employees` (as itself or as `e`) without an index. A search
  /// may scan the distinct names, `employee_names`: their count, not the employees', sets
  /// its cost.
  public static func scansEmployees(_ line: String) -> Bool {
    guard !line.contains("INDEX") else { return false }
    return ["SCAN e", "SCAN employees"].contains { line == $0 || line.hasPrefix($0 + " ") }
  }
}

extension SQLiteStore {
  /// The plans of every query shape the store's reads run, with representative arguments:
  /// each listing order with each kind of filter and cursor, counts, point reads, every
  /// analytics statement, and each aggregate function and grouping. `roster explain` prints
  /// them; the query-plan tests check the same shapes.
  ///
  /// - Parameter analyze: run `ANALYZE` first, so the planner uses statistics.
  public func explainQueries(analyze: Bool = false) throws -> [QueryPlan] {
    if analyze { try self.write { db in try db.execute(sql: "ANALYZE") } }
    var queries: [(String, String, StatementArguments)] = []
    let filters: [(String, EmployeeFilter)] = [
      ("no filter", EmployeeFilter()),
      ("department", EmployeeFilter(department: "Sales")),
      ("active", EmployeeFilter(active: true)),
      ("department and active", EmployeeFilter(department: "Sales", active: true)),
      ("name_contains", EmployeeFilter(nameContains: "jos")),
    ]
    for order in EmployeeOrder.allCases {
      for (label, filter) in filters {
        for cursor in [
          nil, EmployeeCursor(keys: EmployeeSQL.sortKeys(order).map { _ in "m" }, id: 5),
        ] {
          let page = EmployeeSQL.page(
            fields: .all,
            filter: filter,
            order: order,
            after: cursor,
            limit: 51
          )
          queries.append(
            (
              "ListEmployees by \(order), \(label)\(cursor == nil ? "" : ", next page")", page.sql,
              page.arguments
            )
          )
        }
      }
    }
    for (label, filter) in filters {
      let count = EmployeeSQL.count(filter)
      queries.append(("CountEmployees, \(label)", count.sql, count.arguments))
    }
    queries.append(
      ("GetEmployee", EmployeeSQL.pointRead(.all), ["00000000-0000-4000-8000-000000000000"])
    )
    let keyed: [(String, String, StatementArguments)] = [
      ("DepartmentHeadcounts", AnalyticsSQL.departments, []),
      ("DepartmentSummary", AnalyticsSQL.department, ["Sales"]),
      ("EmployeeSales", AnalyticsSQL.employeeSales, ["00000000-0000-4000-8000-000000000000"]),
      ("SalesCalendar months, an employee", AnalyticsSQL.employeeMonths, [1]),
      ("SalesCalendar months, a department", AnalyticsSQL.departmentMonths, ["Sales"]),
      ("SalesCalendar months, everyone", AnalyticsSQL.everyoneMonths, []),
      ("SalesCalendar cache version", AnalyticsSQL.monthVersion, ["2024-03"]),
      (
        "SalesCalendar days, an employee", AnalyticsSQL.employeeDays,
        [1, "2024-03-01", "2024-03-31"]
      ),
      (
        "SalesCalendar days, a department", AnalyticsSQL.departmentDays,
        ["2024-03-01", "2024-03-31", "Sales"]
      ),
      ("SalesCalendar days, everyone", AnalyticsSQL.everyoneDays, ["2024-03-01", "2024-03-31"]),
    ]
    queries += keyed
    let salesFilters: [(String, SalesFilter)] = [
      ("all sales", SalesFilter()),
      (
        "a department, whole months",
        SalesFilter(department: "Sales", fromDate: "2024-01-01", toDate: "2024-06-30")
      ),
      ("an employee", SalesFilter(employeeGUID: "00000000-0000-4000-8000-000000000000")),
      ("a day range", SalesFilter(fromDate: "2024-03-05", toDate: "2024-03-20")),
    ]
    for function in AggregateFunction.allCases {
      for grouping in AggregateGrouping.allCases where grouping != .active {
        for (label, filter) in salesFilters {
          let query = try AnalyticsSQL.aggregateSales(function, grouping, filter)
          queries.append(
            ("AggregateSales \(function) by \(grouping), \(label)", query.sql, query.arguments)
          )
        }
      }
      for (grouping, key) in [
        ("none", "''"), ("department", "e.department"), ("active", "e.active"),
      ] {
        let query = AnalyticsSQL.aggregateEmployees(
          function,
          key: key,
          EmployeeFilter(department: "Sales")
        )
        queries.append(
          (
            "AggregateEmployees \(function) by \(grouping), a department", query.sql,
            query.arguments
          )
        )
      }
    }
    return try self.read { (db: Database) in
      try queries.map { name, sql, arguments in
        let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments)
          .map { $0["detail"] as String }
        return QueryPlan(name: name, sql: sql, plan: plan)
      }
    }
  }
}
