internal import Foundation
internal import GRDB
public import RosterDomain

extension SQLiteStore {
  // MARK: Writes

  /// Rows per transaction of `deleteEmployees`, so no delete holds the writer for long.
  static let deleteChunkRows = 500

  /// Inserts a new employee.
  ///
  /// - Throws: `invalidArgument` naming a bad field; `alreadyExists` when the guid is taken.
  public func createEmployee(
    _ employee: Employee,
    context: WriteContext = WriteContext()
  ) async throws -> Employee {
    let employee = try EmployeeValidation.validated(employee)
    return try await self.submit { db in
      if try Self.fetchEmployee(db, guid: employee.guid, fields: []) != nil {
        throw StoreError(.alreadyExists, "an employee with guid '\(employee.guid)' already exists")
      }
      let now = Self.nowMillis()
      try Self.insert(db, employee, now: now)
      try self.record(
        db,
        entity: .employee,
        guid: employee.guid,
        kind: .inserted,
        context: context,
        timeMillis: now
      )
      // The row as stored, without reading it back: a new row has no picture and no sales.
      var created = employee
      created.id = db.lastInsertedRowID
      created.updateTimeMillis = now
      return created
    }
  }

  /// Sets the fields `changes` holds on the employee with `guid`.
  ///
  /// The change log records the fields whose values actually changed. `update_time` moves
  /// on every update, even one that changes nothing else.
  /// - Throws: `invalidArgument` naming a bad field; `notFound` for an unknown guid.
  public func updateEmployee(
    guid: String,
    changes: EmployeeChanges,
    context: WriteContext = WriteContext()
  ) async throws -> Employee {
    try EmployeeValidation.validate(changes)
    return try await self.submit { db in
      // Read every returned field up front, so the answer needs no second read.
      guard let old = try Self.fetchEmployee(db, guid: guid, fields: .allButThumbnail) else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      var new = changes.applied(to: old)
      let paths = EmployeeChanges.differences(old, new)
      let now = Self.nowMillis()
      new.updateTimeMillis = now
      try Self.update(db, id: old.id, to: new, paths: paths, now: now)
      try self.record(
        db,
        entity: .employee,
        guid: guid,
        kind: .updated,
        fields: paths.map(\.rawValue),
        context: context,
        timeMillis: now
      )
      return new
    }
  }

  /// Deletes the employee with `guid`; their thumbnail goes with them (cascade).
  ///
  /// - Throws: `notFound` for an unknown guid.
  public func deleteEmployee(guid: String, context: WriteContext = WriteContext()) async throws {
    let picture = try await self.submit { db -> String? in
      guard
        let row = try Row.fetchOne(
          db,
          sql: "DELETE FROM employees WHERE guid = ? RETURNING picture_etag",
          arguments: [guid]
        )
      else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      try self.record(
        db,
        entity: .employee,
        guid: guid,
        kind: .deleted,
        context: context,
        timeMillis: Self.nowMillis()
      )
      return row[0]
    }
    if let picture { await self.releasePictureFiles([picture]) }
  }

  /// Sets `department`, `active` or `vacationDays` on every employee matching `filter`, in
  /// one set-based UPDATE. Rows that already hold the values are left alone.
  ///
  /// - Returns: how many employees changed.
  /// - Throws: `invalidArgument` when `changes` sets nothing, sets another field, or holds a
  ///   bad value.
  public func batchUpdateEmployees(
    filter: EmployeeFilter,
    changes: EmployeeChanges,
    context: WriteContext = WriteContext()
  ) async throws -> Int {
    if changes.isEmpty {
      throw StoreError(
        .invalidArgument,
        "a batch update must set department, active or vacation_days"
      )
    }
    if let field = changes.fields.first(where: { !EmployeeField.batchEditable.contains($0) }) {
      throw StoreError(.invalidArgument, "\(field.rawValue) cannot be set by a batch update")
    }
    try EmployeeValidation.validate(changes)
    var assignments: [String] = []
    var differs: [String] = []
    var values: [any DatabaseValueConvertible] = []
    if let department = changes.department {
      assignments.append("department = ?")
      differs.append("e.department IS NOT ?")
      values.append(department)
    }
    if let active = changes.active {
      assignments.append("active = ?")
      differs.append("e.active IS NOT ?")
      values.append(active)
    }
    if let vacationDays = changes.vacationDays {
      assignments.append("vacation_days = ?")
      differs.append("e.vacation_days IS NOT ?")
      values.append(vacationDays)
    }
    let (terms, filterArguments) = EmployeeSQL.filterTerms(filter)
    let conditions = terms + ["(" + differs.joined(separator: " OR ") + ")"]
    let sql = """
      UPDATE employees AS e SET \(assignments.joined(separator: ", ")), update_time = ?
      WHERE \(conditions.joined(separator: " AND ")) RETURNING guid
      """
    let paths = changes.fields
    let assigned = StatementArguments(values.map(Optional.some))
    let matched = StatementArguments((filterArguments + values).map(Optional.some))
    return try await self.submit { db in
      // The time of the write, not of the request: it may have waited in the writer's queue.
      let now = Self.nowMillis()
      let arguments = assigned + [now] + matched
      let guids = try String.fetchAll(db, sql: sql, arguments: arguments)
      for guid in guids {
        try self.record(
          db,
          entity: .employee,
          guid: guid,
          kind: .updated,
          fields: paths.map(\.rawValue),
          context: context,
          timeMillis: now
        )
      }
      return guids.count
    }
  }

  /// Deletes up to `limit` employees matching `filter`, in chunks of a few hundred rows, each
  /// its own transaction, so interactive writes run between chunks.
  ///
  /// - Returns: how many were deleted, and whether more still match.
  public func deleteEmployees(
    filter: EmployeeFilter,
    limit: Int,
    context: WriteContext = WriteContext()
  ) async throws -> (deleted: Int, more: Bool) {
    precondition(limit > 0 && limit <= StoreLimits.maximumDeleteLimit)
    let (terms, filterArguments) = EmployeeSQL.filterTerms(filter)
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    let sql = """
      DELETE FROM employees WHERE id IN (SELECT e.id FROM employees e\(whereClause) LIMIT ?)
      RETURNING guid, picture_etag
      """
    var deleted = 0
    while deleted < limit {
      let chunk = min(Self.deleteChunkRows, limit - deleted)
      let list: [any DatabaseValueConvertible] = filterArguments + [chunk]
      let arguments = StatementArguments(list.map(Optional.some))
      let (count, pictures) = try await self.submit(bulk: true) { db in
        let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
        let now = Self.nowMillis()
        for row in rows {
          let guid: String = row[0]
          try self.record(
            db,
            entity: .employee,
            guid: guid,
            kind: .deleted,
            context: context,
            timeMillis: now
          )
        }
        return (rows.count, rows.compactMap { $0[1] as String? })
      }
      await self.releasePictureFiles(pictures)
      deleted += count
      if count < chunk { return (deleted, false) }
    }
    let more = try self.readStatement { db in
      try Bool.fetchOne(
        db,
        sql: "SELECT EXISTS (SELECT 1 FROM employees e\(whereClause))",
        arguments: StatementArguments(filterArguments)
      ) ?? false
    }
    return (deleted, more)
  }

  // MARK: Row writes, shared by the single and bulk paths

  static func nowMillis() -> Int64 {
    Int64(Date().timeIntervalSince1970 * 1000)
  }

  private static let insertSQL = """
    INSERT INTO employees (guid, name, name_folded, department, email, phone, address, about,
      active, start_date, vacation_days, update_time)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    """

  /// Inserts a validated employee through a cached prepared statement.
  static func insert(_ db: Database, _ employee: Employee, now: Int64) throws {
    let statement = try db.cachedStatement(sql: self.insertSQL)
    try statement.execute(arguments: [
      employee.guid, employee.name, TextFolding.fold(employee.name), employee.department,
      employee.email, employee.phone, employee.address, employee.about, employee.active,
      employee.startDate, employee.vacationDays, now,
    ])
  }

  /// Writes the columns behind `paths` from `employee`, plus `update_time`, to row `id`.
  static func update(
    _ db: Database,
    id: Int64,
    to employee: Employee,
    paths: [EmployeeField],
    now: Int64
  ) throws {
    var assignments: [String] = []
    var arguments: [any DatabaseValueConvertible] = []
    for path in paths {
      for (column, value) in Self.columns(of: path, in: employee) {
        assignments.append("\(column) = ?")
        arguments.append(value)
      }
    }
    assignments.append("update_time = ?")
    arguments += [now, id]
    let statement = try db.cachedStatement(
      sql: "UPDATE employees SET \(assignments.joined(separator: ", ")) WHERE id = ?"
    )
    try statement.execute(arguments: StatementArguments(arguments))
  }

  /// The columns behind an editable path, with their values in `employee`.
  private static func columns(
    of path: EmployeeField,
    in employee: Employee
  ) -> [(String, any DatabaseValueConvertible)] {
    switch path {
    case .name: [("name", employee.name), ("name_folded", TextFolding.fold(employee.name))]
    case .department: [("department", employee.department)]
    case .email: [("email", employee.email)]
    case .phone: [("phone", employee.phone)]
    case .address: [("address", employee.address)]
    case .about: [("about", employee.about)]
    case .active: [("active", employee.active)]
    case .startDate: [("start_date", employee.startDate)]
    case .vacationDays: [("vacation_days", employee.vacationDays)]
    default: preconditionFailure("not an editable field: \(path)")
    }
  }
}
