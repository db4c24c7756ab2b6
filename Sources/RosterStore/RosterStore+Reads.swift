internal import GRDB

extension RosterStore {
  // MARK: Reads

  /// The most rows one page may hold.
  public static let maximumPageSize = 1000

  /// One employee by guid, reading only `fields`.
  ///
  /// - Throws: `StoreError.notFound` naming the guid.
  public func employee(guid: String, fields: EmployeeFields) async throws -> Employee {
    try await self.read(.point, statement: true) { db in
      guard let employee = try Self.fetchEmployee(db, guid: guid, fields: fields) else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      return employee
    }
  }

  /// Employees by guid, in the order asked, all or nothing, from one read transaction.
  ///
  /// - Throws: `StoreError.notFound` naming the first unknown guid.
  public func employees(guids: [String], fields: EmployeeFields) async throws -> [Employee] {
    try await self.read(.point) { db in
      var result: [Employee] = []
      result.reserveCapacity(guids.count)
      for guid in guids {
        guard let employee = try Self.fetchEmployee(db, guid: guid, fields: fields) else {
          throw StoreError(.notFound, "no employee with guid '\(guid)'")
        }
        result.append(employee)
      }
      return result
    }
  }

  /// One keyset page of employees strictly after `cursor`: in the interactive lane, or the
  /// heavy one when a name filter makes its cost grow with the data.
  public func employeePage(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int
  ) async throws -> EmployeePage {
    precondition(limit > 0 && limit <= Self.maximumPageSize)
    if let cursor, cursor.keys.count != EmployeeSQL.sortKeys(order).count {
      throw StoreError(.invalidArgument, "page_token does not belong to this order")
    }
    let query = EmployeeSQL.page(
      fields: fields,
      filter: filter,
      order: order,
      after: cursor,
      limit: limit + 1
    )
    let kind: ReadKind = filter.nameContains == nil ? .interactive : .heavy
    return try await self.read(kind, statement: true) { db in
      let statement = try db.cachedStatement(sql: query.sql)
      var employees: [Employee] = []
      employees.reserveCapacity(limit)
      var next: EmployeeCursor?
      var lastKeys: [String] = []
      let rows = try Row.fetchCursor(statement, arguments: query.arguments)
      while let row = try rows.next() {
        if employees.count == limit {
          let last = employees[employees.count - 1]
          next = EmployeeCursor(keys: lastKeys, id: last.id)
          break
        }
        let (employee, keyIndex) = try EmployeeSQL.decode(row, fields)
        lastKeys = (keyIndex..<row.count).map { row[$0] as String }
        employees.append(employee)
      }
      return EmployeePage(employees: employees, next: next)
    }
  }

  /// How many employees match `filter`, counted in SQL, in the heavy lane: a count visits
  /// every match.
  public func countEmployees(filter: EmployeeFilter) async throws -> Int64 {
    let query = EmployeeSQL.count(filter)
    return try await self.read(.heavy, statement: true) { db in
      let statement = try db.cachedStatement(sql: query.sql)
      return try Int64.fetchOne(statement, arguments: query.arguments) ?? 0
    }
  }

  static func fetchEmployee(
    _ db: Database,
    guid: String,
    fields: EmployeeFields
  ) throws -> Employee? {
    let statement = try db.cachedStatement(sql: EmployeeSQL.pointRead(fields))
    guard let row = try Row.fetchOne(statement, arguments: [guid]) else { return nil }
    return try EmployeeSQL.decode(row, fields).0
  }
}
