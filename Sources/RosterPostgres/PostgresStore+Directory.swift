internal import PostgresNIO
public import RosterDomain

extension PostgresStore {
  // MARK: Writes

  /// Inserts a new employee.
  public func createEmployee(_ employee: Employee, context: WriteContext) async throws -> Employee {
    let employee = try EmployeeValidation.validated(employee)
    // One INSERT that does nothing when the guid is taken: no savepoint needed. The writer
    // runs the creates beside each other in a batch as one statement (`EmployeeInserts`).
    return try await self.submitInsert(employee) { transaction, id, now in
      guard let id else {
        throw StoreError(.alreadyExists, "an employee with guid '\(employee.guid)' already exists")
      }
      transaction.record(
        .employee,
        guid: employee.guid,
        kind: .inserted,
        context: context,
        timeMillis: now
      )
      var created = employee
      created.id = id
      created.updateTimeMillis = now
      return created
    }
  }

  /// Sets the fields `changes` holds on the employee with `guid`.
  public func updateEmployee(
    guid: String,
    changes: EmployeeChanges,
    context: WriteContext
  ) async throws -> Employee {
    try EmployeeValidation.validate(changes)
    // One statement reads the row as it was, locks it and writes the fields asked for: no
    // savepoint needed, as nothing has changed when the employee is missing. The writer runs
    // the prepared ones beside each other in a batch as one statement (`EmployeeUpdates`).
    if let prepared = EmployeeUpdate(guid: guid, changes: changes) {
      return try await self.submitUpdate(prepared) { transaction, row, now in
        try Self.updated(
          row,
          guid: guid,
          changes: changes,
          now: now,
          context: context,
          in: transaction
        )
      }
    }
    return try await self.submit(savepoint: false) { transaction in
      let now = Self.nowMillis()
      var builder = SQLBuilder()
      let assignments = Self.assignments(
        changes.applied(to: Employee()),
        paths: changes.fields,
        now: now,
        into: &builder
      )
      builder.sql = """
        WITH old AS (\(PostgresEmployeeSQL.select(.allButThumbnail)) WHERE e.guid = \(builder.bind(guid)) FOR UPDATE OF e),
        changed AS (UPDATE employees SET \(assignments) FROM old WHERE employees.id = old.id)
        SELECT * FROM old
        """
      let found = try await transaction.row(builder.query)
      return try Self.updated(
        found,
        guid: guid,
        changes: changes,
        now: now,
        context: context,
        in: transaction
      )
    }
  }

  /// The employee an update wrote, from the row it read as it was (nil: no such employee),
  /// with its change recorded.
  static func updated(
    _ row: PostgresRandomAccessRow?,
    guid: String,
    changes: EmployeeChanges,
    now: Int64,
    context: WriteContext,
    in transaction: WriteTransaction
  ) throws -> Employee {
    guard let row else {
      throw StoreError(.notFound, "no employee with guid '\(guid)'")
    }
    let old = try PostgresEmployeeSQL.decode(row, .allButThumbnail).0
    var new = changes.applied(to: old)
    let paths = EmployeeChanges.differences(old, new)
    new.updateTimeMillis = now
    transaction.record(
      .employee,
      guid: guid,
      kind: .updated,
      fields: paths.map(\.rawValue),
      context: context,
      timeMillis: now
    )
    return new
  }

  /// Deletes the employee with `guid`; their thumbnail, sales and (unless shared) picture go
  /// with them.
  public func deleteEmployee(guid: String, context: WriteContext) async throws {
    // One DELETE that does nothing when the guid is missing: no savepoint needed.
    try await self.submit(savepoint: false) { transaction in
      let gone = try await transaction.rows(
        "DELETE FROM employees WHERE guid = \(guid) RETURNING id"
      )
      guard !gone.isEmpty else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
      transaction.record(
        .employee,
        guid: guid,
        kind: .deleted,
        context: context,
        timeMillis: Self.nowMillis()
      )
    }
  }

  /// Sets `department`, `active` or `vacationDays` on every employee matching `filter`, in
  /// one set-based UPDATE; rows that already hold the values are left alone.
  public func batchUpdateEmployees(
    filter: EmployeeFilter,
    changes: EmployeeChanges,
    context: WriteContext
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
    let paths = changes.fields.map(\.rawValue)
    return try await self.transaction { transaction in
      let now = Self.nowMillis()
      var builder = SQLBuilder()
      var assignments: [String] = []
      var differs: [String] = []
      if let department = changes.department {
        let mark = builder.bind(department)
        assignments.append("department = \(mark)")
        differs.append("e.department IS DISTINCT FROM \(mark)")
      }
      if let active = changes.active {
        let mark = builder.bind(active)
        assignments.append("active = \(mark)")
        differs.append("e.active IS DISTINCT FROM \(mark)")
      }
      if let vacationDays = changes.vacationDays {
        let mark = builder.bind(vacationDays)
        assignments.append("vacation_days = \(mark)::int4")
        differs.append("e.vacation_days IS DISTINCT FROM \(mark)::int4")
      }
      assignments.append("update_time = \(builder.bind(now))")
      let terms =
        PostgresEmployeeSQL.filterTerms(filter, into: &builder) + [
          "(" + differs.joined(separator: " OR ") + ")"
        ]
      builder.sql = """
        UPDATE employees AS e SET \(assignments.joined(separator: ", "))
        WHERE \(terms.joined(separator: " AND ")) RETURNING e.guid
        """
      let guids = try await transaction.rows(builder.query).map { try $0[0].decode(String.self) }
      for guid in guids {
        transaction.record(
          .employee,
          guid: guid,
          kind: .updated,
          fields: paths,
          context: context,
          timeMillis: now
        )
      }
      return guids.count
    }
  }

  /// Rows per transaction of `deleteEmployees`.
  static let deleteChunkRows = 500

  /// Deletes up to `limit` employees matching `filter`, a few hundred per transaction.
  public func deleteEmployees(
    filter: EmployeeFilter,
    limit: Int,
    context: WriteContext
  ) async throws -> (deleted: Int, more: Bool) {
    precondition(limit > 0 && limit <= StoreLimits.maximumDeleteLimit)
    var deleted = 0
    while deleted < limit {
      let chunk = min(Self.deleteChunkRows, limit - deleted)
      let count = try await self.transaction { transaction in
        var builder = SQLBuilder()
        let terms = PostgresEmployeeSQL.filterTerms(filter, into: &builder)
        let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
        builder.sql = """
          DELETE FROM employees WHERE id IN (
            SELECT e.id FROM employees e\(whereClause) LIMIT \(builder.bind(chunk)) FOR UPDATE SKIP LOCKED
          ) RETURNING guid
          """
        let guids = try await transaction.rows(builder.query).map { try $0[0].decode(String.self) }
        let now = Self.nowMillis()
        for guid in guids {
          transaction.record(
            .employee,
            guid: guid,
            kind: .deleted,
            context: context,
            timeMillis: now
          )
        }
        return guids.count
      }
      deleted += count
      if count < chunk { break }
    }
    var builder = SQLBuilder()
    let terms = PostgresEmployeeSQL.filterTerms(filter, into: &builder)
    let whereClause = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
    builder.sql = "SELECT EXISTS (SELECT 1 FROM employees e\(whereClause))"
    let more = try await self.row(builder.query)?[0].decode(Bool.self) ?? false
    return (deleted, more)
  }

  // MARK: Row writes, shared by the single and bulk paths

  /// Inserts a validated employee; returns its row id, or nil when the guid is taken.
  static func insert(
    _ employee: Employee,
    now: Int64,
    in transaction: WriteTransaction
  ) async throws -> Int64? {
    try await transaction.row(EmployeeInsert(employee: employee, now: now))?[0].decode(Int64.self)
  }

  /// Reads an employee's `fields` and locks the row until the transaction ends.
  static func lockEmployee(
    _ guid: String,
    fields: EmployeeFields,
    in transaction: WriteTransaction
  ) async throws -> Employee? {
    var builder = SQLBuilder()
    builder.sql =
      PostgresEmployeeSQL.select(fields) + " WHERE e.guid = \(builder.bind(guid)) FOR UPDATE OF e"
    guard let row = try await transaction.row(builder.query) else { return nil }
    return try PostgresEmployeeSQL.decode(row, fields).0
  }

  /// Writes the columns behind `paths` from `employee`, plus `update_time`, to row `id`.
  static func update(
    id: Int64,
    to employee: Employee,
    paths: [EmployeeField],
    now: Int64,
    in transaction: WriteTransaction
  ) async throws {
    var builder = SQLBuilder()
    let assignments = Self.assignments(employee, paths: paths, now: now, into: &builder)
    builder.sql = "UPDATE employees SET \(assignments) WHERE id = \(builder.bind(id))"
    try await transaction.execute(builder.query)
  }

  /// The SET list that writes the columns behind `paths` from `employee`, plus `update_time`.
  static func assignments(
    _ employee: Employee,
    paths: [EmployeeField],
    now: Int64,
    into builder: inout SQLBuilder
  ) -> String {
    var assignments: [String] = []
    for path in paths {
      switch path {
      case .name:
        assignments.append("name = \(builder.bind(employee.name))")
        assignments.append("name_folded = \(builder.bind(TextFolding.fold(employee.name)))")
      case .department: assignments.append("department = \(builder.bind(employee.department))")
      case .email: assignments.append("email = \(builder.bind(employee.email))")
      case .phone: assignments.append("phone = \(builder.bind(employee.phone))")
      case .address: assignments.append("address = \(builder.bind(employee.address))")
      case .about: assignments.append("about = \(builder.bind(employee.about))")
      case .active: assignments.append("active = \(builder.bind(employee.active))")
      case .startDate: assignments.append("start_date = \(builder.bind(employee.startDate))")
      case .vacationDays:
        assignments.append(
          "vacation_days = \(builder.bind(Int32(clamping: employee.vacationDays)))"
        )
      default: preconditionFailure("not an editable field: \(path)")
      }
    }
    assignments.append("update_time = \(builder.bind(now))")
    return assignments.joined(separator: ", ")
  }
}
