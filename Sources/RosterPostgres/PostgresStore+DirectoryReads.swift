internal import PostgresNIO
public import RosterDomain

extension PostgresStore {
  /// One employee by guid, reading only `fields`.
  public func employee(guid: String, fields: EmployeeFields) async throws -> Employee {
    let notFound = StoreError(.notFound, "no employee with guid '\(guid)'")
    // The whole employee: with the others read at the same moment (`PointReads`), unless the
    // read must see a change (its batch may be led by a read that need not).
    if fields == EmployeesByGuid.fields, CallControl.current?.mustSee == nil {
      guard let employee = try await self.pointReads.employee(guid: guid, store: self) else {
        throw notFound
      }
      return employee
    }
    var builder = SQLBuilder()
    builder.sql = PostgresEmployeeSQL.select(fields) + " WHERE e.guid = \(builder.bind(guid))"
    guard let row = try await self.row(builder.query) else { throw notFound }
    return try PostgresEmployeeSQL.decode(row, fields).0
  }

  /// The employee with an e-mail address, through `employees_by_email`.
  public func employee(email: String, fields: EmployeeFields) async throws -> Employee {
    var builder = SQLBuilder()
    builder.sql =
      PostgresEmployeeSQL.select(fields)
      + #" WHERE lower(e.email COLLATE "C") = lower(\#(builder.bind(email))::text COLLATE "C")"#
      + " ORDER BY e.id LIMIT 1"
    guard let row = try await self.row(builder.query) else {
      throw StoreError(.notFound, "no employee has that email")
    }
    return try PostgresEmployeeSQL.decode(row, fields).0
  }

  /// The whole employees with `guids` (those there are), by guid, from one prepared statement.
  func employeesByGuid(_ guids: [String]) async throws -> [String: Employee] {
    try await self.read { connection in
      var found: [String: Employee] = [:]
      for try await row in try await connection.execute(
        EmployeesByGuid(guids: guids),
        logger: self.logger
      ) {
        let employee = try PostgresEmployeeSQL.decode(row, EmployeesByGuid.fields).0
        found[employee.guid] = employee
      }
      return found
    }
  }

  /// Employees by guid, in the order asked, all or nothing, from one statement.
  public func employees(guids: [String], fields: EmployeeFields) async throws -> [Employee] {
    var builder = SQLBuilder()
    builder.sql =
      PostgresEmployeeSQL.select(fields.union(.guid))
      + " WHERE e.guid = ANY(\(builder.bind(guids)))"
    var found: [String: Employee] = [:]
    for row in try await self.rows(builder.query) {
      let employee = try PostgresEmployeeSQL.decode(row, fields.union(.guid)).0
      found[employee.guid] = employee
    }
    return try guids.map { guid in
      guard var employee = found[guid] else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      if !fields.contains(.guid) { employee.guid = "" }
      return employee
    }
  }

  /// Consecutive keyset pages of employees strictly after `cursor`, from one statement.
  public func employeePages(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int
  ) async throws -> [EmployeePage] {
    precondition(limit > 0 && count > 0 && limit * count <= StoreLimits.maximumPageSize)
    if let cursor, cursor.keys.count != PostgresEmployeeSQL.sortKeys(order).count {
      throw StoreError(.invalidArgument, "the cursor does not belong to this order")
    }
    let query = PostgresEmployeeSQL.page(
      fields: fields,
      filter: filter,
      order: order,
      after: cursor,
      limit: limit * count + 1
    )
    var pages = EmployeePages(limit: limit, count: count)
    // A name search's cost grows with its matches: a heavy read.
    let rows =
      filter.nameContains == nil
      ? try await self.rows(query)
      : try await self.heavy {
        try await $0.rows(query)
      }
    for row in rows {
      guard pages.takes() else { break }
      let (employee, keyIndex) = try PostgresEmployeeSQL.decode(row, fields)
      try pages.append(employee, id: employee.id) {
        try (keyIndex ..< row.count).map { try row[$0].decode(String.self) }
      }
    }
    return pages.result
  }

  /// How many employees match `filter`, counted by the server, as a heavy read: a count
  /// visits every match.
  public func countEmployees(filter: EmployeeFilter) async throws -> Int64 {
    guard let row = try await self.heavy({ try await $0.row(PostgresEmployeeSQL.count(filter)) })
    else { return 0 }
    return try row[0].decode(Int64.self)
  }
}
