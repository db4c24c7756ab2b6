internal import PostgresNIO
internal import RosterDomain

/// An update of an employee's fields other than the name and the department (which keep
/// counters of their own by triggers, and take the statement of their own text): prepared once
/// on each pooled connection, it names every column it may set and keeps the ones the mask
/// leaves out as they were. A statement of its own text per update cost PostgreSQL a parse and
/// a plan each time.
struct EmployeeUpdate: RowStatement {
  /// The fields it sets and their columns, each a bit of the mask, in this order (the order
  /// `EmployeeInsert.appendContactAndTerms` binds them in).
  static let settable: [(field: EmployeeField, column: String)] = [
    (.email, "email"), (.phone, "phone"), (.address, "address"), (.about, "about"),
    (.active, "active"), (.startDate, "start_date"), (.vacationDays, "vacation_days"),
  ]
  static let sql = """
    WITH old AS (\(PostgresEmployeeSQL.select(.allButThumbnail)) WHERE e.guid = $1 FOR UPDATE OF e),
    changed AS (
      UPDATE employees SET \(Self.assignments(mask: "$2::int4") { index, _ in "$\(index + 3)" }), update_time = $10
      FROM old WHERE employees.id = old.id)
    SELECT * FROM old
    """

  /// `column = CASE WHEN mask & bit <> 0 THEN value ELSE column END` for each settable column,
  /// `value(index, column)` giving the new value's expression.
  static func assignments(mask: String, value: (Int, String) -> String) -> String {
    Self.settable.enumerated().map { index, settable in
      let column = settable.column
      return
        "\(column) = CASE WHEN \(mask) & \(1 << index) <> 0 THEN \(value(index, column)) ELSE employees.\(column) END"
    }.joined(separator: ", ")
  }

  var guid: String
  var mask: Int32
  var values: Employee
  var now: Int64 = 0

  /// The statement for `changes`, or nil when they set a field it does not.
  init?(guid: String, changes: EmployeeChanges) {
    var mask: Int32 = 0
    for field in changes.fields {
      guard let bit = Self.settable.firstIndex(where: { $0.field == field }) else { return nil }
      mask |= 1 << bit
    }
    self.guid = guid
    self.mask = mask
    self.values = changes.applied(to: Employee())
  }

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 10)
    bindings.append(self.guid)
    bindings.append(self.mask)
    EmployeeInsert.appendContactAndTerms(of: self.values, to: &bindings)
    bindings.append(self.now)
    return bindings
  }
}

/// Several `EmployeeUpdate`s of different employees as one statement, for the writer's batches
/// (`WriteQueue`): each element of the arrays is one update, with its own mask; the rows come
/// back as they were, as `EmployeeUpdate`'s one row does, in no particular order (by guid).
/// One round trip instead of one per update: with 64 clients, the writer's batches spent most
/// of their time waiting for each update's answer in turn.
struct EmployeeUpdates: RowStatement {
  static let sql = """
    WITH input AS (
      SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::bool[], $8::text[], $9::int4[])
        AS i(guid, mask, email, phone, address, about, active, start_date, vacation_days)),
    old AS (\(PostgresEmployeeSQL.select(.allButThumbnail)) JOIN input i ON i.guid = e.guid FOR UPDATE OF e),
    changed AS (
      UPDATE employees SET \(EmployeeUpdate.assignments(mask: "i.mask") { _, column in "i.\(column)" }), update_time = $10
      FROM old JOIN input i ON i.guid = old.guid WHERE employees.id = old.id)
    SELECT * FROM old
    """
  /// The updates, each of a different employee.
  var updates: [EmployeeUpdate]
  var now: Int64

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 10)
    bindings.append(self.updates.map(\.guid))
    bindings.append(self.updates.map(\.mask))
    bindings.append(self.updates.map(\.values.email))
    bindings.append(self.updates.map(\.values.phone))
    bindings.append(self.updates.map(\.values.address))
    bindings.append(self.updates.map(\.values.about))
    bindings.append(self.updates.map(\.values.active))
    bindings.append(self.updates.map(\.values.startDate))
    bindings.append(self.updates.map { Int32(clamping: $0.values.vacationDays) })
    bindings.append(self.now)
    return bindings
  }
}

/// A new employee's row, unless the guid is taken (then no row comes back): prepared once on
/// each pooled connection, as `EmployeeUpdate` is.
struct EmployeeInsert: RowStatement {
  static let sql = """
    INSERT INTO employees (guid, name, name_folded, department, email, phone, address, about,
      active, start_date, vacation_days, update_time)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
    ON CONFLICT (guid) DO NOTHING
    RETURNING id
    """
  var employee: Employee
  var now: Int64

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 12)
    bindings.append(self.employee.guid)
    bindings.append(self.employee.name)
    bindings.append(TextFolding.fold(self.employee.name))
    bindings.append(self.employee.department)
    Self.appendContactAndTerms(of: self.employee, to: &bindings)
    bindings.append(self.now)
    return bindings
  }

  /// `email`, `phone`, `address`, `about`, `active`, `start_date` and `vacation_days`, in that
  /// order: the columns both this and `EmployeeUpdate` bind in a row.
  static func appendContactAndTerms(of employee: Employee, to bindings: inout PostgresBindings) {
    bindings.append(employee.email)
    bindings.append(employee.phone)
    bindings.append(employee.address)
    bindings.append(employee.about)
    bindings.append(employee.active)
    bindings.append(employee.startDate)
    bindings.append(Int32(clamping: employee.vacationDays))
  }
}

/// Several new employees as one statement, for the writer's batches (`WriteQueue`), as
/// `EmployeeUpdates` is for updates: each element of the arrays is one employee, each of a
/// different guid; the ids of the rows written come back with their guids, and a guid already
/// taken gets no row, as `EmployeeInsert`'s does.
struct EmployeeInserts: RowStatement {
  static let sql = """
    INSERT INTO employees (guid, name, name_folded, department, email, phone, address, about,
      active, start_date, vacation_days, update_time)
    SELECT i.*, $12 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
      $6::text[], $7::text[], $8::text[], $9::bool[], $10::text[], $11::int4[]) AS i
    ON CONFLICT (guid) DO NOTHING
    RETURNING id, guid
    """
  /// The new employees, each of a different guid.
  var employees: [Employee]
  var now: Int64

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 12)
    bindings.append(self.employees.map(\.guid))
    bindings.append(self.employees.map(\.name))
    bindings.append(self.employees.map { TextFolding.fold($0.name) })
    bindings.append(self.employees.map(\.department))
    bindings.append(self.employees.map(\.email))
    bindings.append(self.employees.map(\.phone))
    bindings.append(self.employees.map(\.address))
    bindings.append(self.employees.map(\.about))
    bindings.append(self.employees.map(\.active))
    bindings.append(self.employees.map(\.startDate))
    bindings.append(self.employees.map { Int32(clamping: $0.vacationDays) })
    bindings.append(self.now)
    return bindings
  }
}
