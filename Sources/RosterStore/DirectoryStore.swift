public import RosterDomain

/// The employee directory as the services see it: reads, pages, counts and writes.
///
/// Every method is `async` and may be called from any task. A read sees one committed state;
/// a write returns only after the commit that holds it. Errors are `StoreError`s with messages
/// that name the offending field and never carry SQL. The SQLite backend (`RosterSQLite`)
/// implements it; the store contract tests (`Tests/StoreContract`) pin its behaviour.
public protocol DirectoryStore: Sendable {
  /// One employee with `fields` read. Throws `notFound` for an unknown guid.
  func employee(guid: String, fields: EmployeeFields) async throws -> Employee

  /// The employee whose e-mail address is `email`, ASCII letters compared without regard to
  /// case; the one created first when several share it. Throws `notFound` when none has it
  /// (a message that does not repeat the address).
  func employee(email: String, fields: EmployeeFields) async throws -> Employee

  /// Employees by guid, in the order asked, all or nothing, from one read. Throws `notFound`
  /// naming the first unknown guid.
  func employees(guids: [String], fields: EmployeeFields) async throws -> [Employee]

  /// Up to `count` consecutive keyset pages strictly after `cursor` in `order`, each of at most
  /// `limit` employees with the cursor of its last row when more may follow, from one read:
  /// the pages `count` calls of `employeePage` would give, each after the one before, ending
  /// with the last page of the listing. At least one page (empty when nothing matches);
  /// `limit × count` is at most `StoreLimits.maximumPageSize`.
  func employeePages(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int
  ) async throws -> [EmployeePage]

  /// The pages `employeePages` reads, each row written by `writer` as it is read rather than
  /// made into an `Employee` (the default, for a backend that decodes rows into values, writes
  /// the values).
  func writtenEmployeePages(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int,
    writer: some EmployeeRowWriter
  ) async throws -> [WrittenEmployeePage]

  /// How many employees match `filter`.
  func countEmployees(filter: EmployeeFilter) async throws -> Int64

  /// Creates an employee (a guid is made when it has none); returns it as stored. Throws
  /// `invalidArgument` naming a missing or bad field, `alreadyExists` for a taken guid.
  func createEmployee(_ employee: Employee, context: WriteContext) async throws -> Employee

  /// Applies `changes` to one employee; returns it as stored. Throws `notFound` for an
  /// unknown guid, `invalidArgument` for a bad value.
  func updateEmployee(
    guid: String,
    changes: EmployeeChanges,
    context: WriteContext
  ) async throws -> Employee

  /// Deletes one employee with their sales and picture. Throws `notFound` for an unknown guid.
  func deleteEmployee(guid: String, context: WriteContext) async throws

  /// Merges rows by guid as they arrive, in chunks each committed on its own (of `chunkRows`
  /// rows, or the backend's default for nil); bad rows are reported with their index and
  /// skipped.
  func upsertEmployees<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext,
    chunkRows: Int?
  ) async throws -> ImportSummary where Rows.Element == [UpsertRow]

  /// Sets `changes` on every employee matching `filter`; returns how many changed.
  func batchUpdateEmployees(
    filter: EmployeeFilter,
    changes: EmployeeChanges,
    context: WriteContext
  ) async throws -> Int

  /// Deletes up to `limit` employees matching `filter`, in chunks each committed on its own;
  /// returns how many went and whether more match.
  func deleteEmployees(
    filter: EmployeeFilter,
    limit: Int,
    context: WriteContext
  ) async throws -> (deleted: Int, more: Bool)
}

extension DirectoryStore {
  /// One keyset page strictly after `cursor` in `order`, at most `limit` employees, with the
  /// cursor of its last row when more may follow.
  public func employeePage(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int
  ) async throws -> EmployeePage {
    try await self.employeePages(
      fields: fields,
      filter: filter,
      order: order,
      after: cursor,
      limit: limit,
      count: 1
    )[0]
  }

  public func writtenEmployeePages(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    count: Int,
    writer: some EmployeeRowWriter
  ) async throws -> [WrittenEmployeePage] {
    let pages = try await self.employeePages(
      fields: fields,
      filter: filter,
      order: order,
      after: cursor,
      limit: limit,
      count: count
    )
    return pages.map { page in
      var written = WrittenEmployeePage(reserving: page.employees.count)
      for employee in page.employees {
        writer.append(employee, to: &written.bytes)
        written.append(())
      }
      written.next = page.next
      return written
    }
  }

  /// Imports complete employees, merged by guid, held in memory: a thin wrapper over
  /// `upsertEmployees` for tests and small loads (`DirectoryLoader` streams large ones).
  public func importEmployees(
    _ employees: some Sequence<Employee>,
    context: WriteContext = WriteContext(author: "import"),
    chunkRows: Int = 20_000
  ) async throws -> ImportSummary {
    let rows = employees.map { UpsertRow(guid: $0.guid, changes: EmployeeChanges(setting: $0)) }
    return try await self.upsertEmployees(
      AsyncBatches(rows, size: 1_000),
      context: context,
      chunkRows: chunkRows
    )
  }
}
