internal import GRDB
internal import GRDBSQLite
public import RosterDomain
public import RosterStore
internal import Synchronization
internal import Tracing

/// How many distinct names there are (the largest id of `employee_names`), as the last name
/// search saw it; until one has, as many as can be.
final class NameCount: Sendable {
  let value = Atomic<Int>(.max)
}

extension SQLiteStore {
  // MARK: Reads

  /// One employee by guid, reading only `fields`.
  ///
  /// - Throws: `StoreError.notFound` naming the guid.
  public func employee(guid: String, fields: EmployeeFields) async throws -> Employee {
    try await self.read(.interactive, statement: true) { db in
      try Self.employee(db, guid: guid, fields: fields)
    }
  }

  /// The employee with an e-mail address, through `employees_by_email`.
  public func employee(email: String, fields: EmployeeFields) async throws -> Employee {
    try await self.read(.interactive, statement: true) { db in
      let statement = try db.cachedStatement(sql: EmployeeSQL.byEmail(fields))
      guard let employee = try Self.fetchEmployee(db, statement, text: email, fields: fields)
      else {
        throw StoreError(.notFound, "no employee has that email")
      }
      return employee
    }
  }

  /// One employee by guid; `notFound` naming it when there is none.
  private static func employee(
    _ db: Database,
    guid: String,
    fields: EmployeeFields
  ) throws -> Employee {
    guard let employee = try Self.fetchEmployee(db, guid: guid, fields: fields) else {
      throw StoreError(.notFound, "no employee with guid '\(guid)'")
    }
    return employee
  }

  /// Employees by guid, in the order asked, all or nothing, from one read transaction.
  ///
  /// - Throws: `StoreError.notFound` naming the first unknown guid.
  public func employees(guids: [String], fields: EmployeeFields) async throws -> [Employee] {
    try await self.read(.interactive) { db in
      var result: [Employee] = []
      result.reserveCapacity(guids.count)
      for guid in guids {
        result.append(try Self.employee(db, guid: guid, fields: fields))
      }
      return result
    }
  }

  /// Consecutive keyset pages of employees strictly after `cursor`, from one statement: in the
  /// interactive lane, or the heavy one when a name filter has many distinct names to test
  /// (`fewNames`).
  public func employeePages(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int
  ) async throws -> [EmployeePage] {
    try await self.keysetPages(
      fields: fields,
      filter: filter,
      order: order,
      after: cursor,
      limit: limit,
      count: count
    ) {
      statement,
      pages in
      let (employee, keyIndex) = EmployeeSQL.decode(statement, fields)
      pages.append(employee, id: employee.id) { EmployeeSQL.keys(statement, from: keyIndex) }
    }
  }

  /// `employeePages` with each row written by `writer` from SQLite's bytes where the cursor
  /// stands: no `Employee`, no String per text.
  public func writtenEmployeePages(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int,
    writer: some EmployeeRowWriter
  ) async throws -> [WrittenEmployeePage] {
    try await self.keysetPages(
      fields: fields,
      filter: filter,
      order: order,
      after: cursor,
      limit: limit,
      count: count
    ) {
      statement,
      pages in
      let (row, keyIndex) = EmployeeSQL.row(statement, fields)
      pages.append(id: row.id, keys: { EmployeeSQL.keys(statement, from: keyIndex) }) { bytes in
        if row.textIsValidUTF8 {
          writer.append(row, to: &bytes)
        } else {
          writer.append(Employee(row), to: &bytes)
        }
      }
    }
  }

  /// The read behind both: `each` takes the row the statement stands on into the pages.
  private func keysetPages<Page: KeysetPage>(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int,
    each: @escaping @Sendable (SQLiteStatement, inout KeysetPages<Page>) -> Void
  ) async throws -> [Page] {
    precondition(limit > 0 && count > 0 && limit * count <= StoreLimits.maximumPageSize)
    if let cursor, cursor.keys.count != EmployeeSQL.sortKeys(order).count {
      throw StoreError(.invalidArgument, "the cursor does not belong to this order")
    }
    // A name filter costs up to a scan of the distinct names: the interactive lane while
    // there are few of them, the heavy lane otherwise.
    let kind: ReadKind =
      filter.nameContains == nil || self.nameCount.value.load(ordering: .relaxed) <= Self.fewNames
      ? .interactive : .heavy
    let nameCount = self.nameCount
    return try await self.read(kind, statement: true) { db in
      if filter.nameContains != nil {
        let names = try Int.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM employee_names"))
        nameCount.value.store(names ?? 0, ordering: .relaxed)
      }
      let query = EmployeeSQL.page(
        fields: fields,
        filter: filter,
        order: order,
        after: cursor,
        limit: limit * count + 1,
        few: try Self.fewNameMatches(db, filter: filter, order: order)
      )
      let statement = try db.cachedStatement(sql: query.sql)
      try statement.setArguments(query.arguments)
      // Stepped with SQLite's C API, as `fetchEmployee`, and each row read where the statement
      // stands (`EmployeeSQL.row`), not copied into a `Row`.
      let handle = statement.sqliteStatement
      defer { sqlite3_reset(handle) }
      var pages = KeysetPages<Page>(limit: limit, count: count)
      while try Self.step(handle, db), pages.takes() {
        each(handle, &pages)
      }
      return pages.result
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

  /// Up to this many distinct names, a name search runs in the interactive lane: testing
  /// every name (one and two characters) then takes a few milliseconds (docs/performance.md).
  static let fewNames = 50_000

  /// At most this many employees matching a name filter are read and sorted into an order
  /// other than by name; with more, the order's index is walked and the page fills after
  /// about `limit × employees / matches` rows (10,000 for 50 at a million employees). The
  /// two costs meet near √(limit × employees).
  static let fewNameMatches: Int64 = 5_000

  /// Whether a name filter matches few enough employees to read them all and sort them
  /// into `order`; the names' counters answer without visiting any employee.
  static func fewNameMatches(
    _ db: Database,
    filter: EmployeeFilter,
    order: EmployeeOrder
  ) throws -> Bool {
    guard order != .name, let text = filter.nameContains else { return false }
    let matching = EmployeeSQL.matchingNames(text, selecting: "coalesce(sum(employees), 0)")
    let statement = try db.cachedStatement(sql: matching.sql)
    let matches = try Int64.fetchOne(statement, arguments: StatementArguments(matching.arguments))
    return (matches ?? 0) <= Self.fewNameMatches
  }

  static func fetchEmployee(
    _ db: Database,
    guid: String,
    fields: EmployeeFields
  ) throws -> Employee? {
    let statement = try db.cachedStatement(sql: EmployeeSQL.pointRead(fields))
    return try Self.fetchEmployee(db, statement, text: guid, fields: fields)
  }

  /// The row `statement` (a `select(fields)` with one text parameter) finds for `text`, or nil.
  static func fetchEmployee(
    _ db: Database,
    _ statement: Statement,
    text: String,
    fields: EmployeeFields
  ) throws -> Employee? {
    // Bound, stepped and reset with SQLite's C API, and the row read where the statement
    // stands (`EmployeeSQL.decode`): GRDB's cursor made a `Row` for it, which lower-cased the
    // statement's column names into a dictionary each time (a twentieth of a `GetEmployee`'s
    // instructions under callgrind when it was measured). Only this function steps these
    // statements.
    let handle = statement.sqliteStatement
    defer {
      sqlite3_reset(handle)
      sqlite3_clear_bindings(handle)
    }
    let bound = text.withCString {
      sqlite3_bind_text(handle, 1, $0, CInt(text.utf8.count), SQLITE_TRANSIENT)
    }
    guard bound == SQLITE_OK else { throw Self.failure(bound, db) }
    return try Self.step(handle, db) ? EmployeeSQL.decode(handle, fields).0 : nil
  }

  /// Steps a statement: whether it stands on a row (false once it is done).
  private static func step(_ handle: SQLiteStatement, _ db: Database) throws -> Bool {
    switch sqlite3_step(handle) {
    case SQLITE_ROW: return true
    case SQLITE_DONE: return false
    case let code: throw Self.failure(code, db)
    }
  }

  /// The error of a call to SQLite's C API that returned `code`, as GRDB reports one.
  private static func failure(_ code: CInt, _ db: Database) -> DatabaseError {
    DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage)
  }
}

/// SQLite copies the bytes it is given (`SQLITE_TRANSIENT`).
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

extension SQLiteStore: PointCalls {
  /// Runs `call` in the interactive lane, where point reads run, so that no event loop ever
  /// waits on the disk: one job, admitted, counted and cancelled as the lane's other jobs.
  public func runPointCall(
    deadline: ContinuousClock.Instant?,
    _ call: @escaping @Sendable () -> Void,
    stopped: @escaping @Sendable (StoreError) -> Void
  ) -> @Sendable () -> Void {
    // When the call is traced, its read records its wait for the lane from here.
    let queued = StoreTracing.isOn ? StoreTracing.now : nil
    let job = self.interactive.submit(
      deadline: deadline,
      { _ in
        guard let queued else { return call() }
        PointCall.$queued.withValue(queued, operation: call)
      },
      stopped: { error in stopped(error as? StoreError ?? .callCancelled) }
    )
    return { job.cancel() }
  }

  /// One employee by guid, read on the calling thread (inside `runPointCall`'s job).
  ///
  /// - Throws: `StoreError.notFound` naming the guid; the call's stop error when its control
  ///   says it is over.
  public func employeeNow(guid: String, fields: EmployeeFields) throws -> Employee {
    try self.readNow(statement: true, wait: PointCall.queued) { db in
      try Self.employee(db, guid: guid, fields: fields)
    }
  }
}

extension SQLiteStore: StoreAdmission {
  /// The interactive lane's refusal (`StoreLane.refusal(dueBy:)`): where a call's reads run,
  /// and behind which, when the machine is saturated, its other work waits too (the heavy lane
  /// runs only when nothing else wants the CPU).
  public func refusal(dueBy deadline: ContinuousClock.Instant) -> StoreError? {
    self.interactive.refusal(dueBy: deadline)
  }
}

/// When the point call running on this thread was queued for the lane, while tracing is on.
private enum PointCall {
  @TaskLocal static var queued: DefaultTracerClock.Instant?
}
