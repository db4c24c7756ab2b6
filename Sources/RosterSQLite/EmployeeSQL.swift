internal import GRDB
internal import GRDBSQLite
internal import RosterDomain
internal import RosterLocks
internal import RosterStore

/// Builds the SQL of every employee read from a field set, a filter and an order.
///
/// The SELECT list holds only the columns behind the requested fields (plus the sort keys a
/// cursor needs), and the thumbnail table is joined only when the thumbnail is asked for.
enum EmployeeSQL {
  /// `EmployeeColumns.select`: the statement every read starts from.
  static func select(
    _ fields: EmployeeFields,
    sortKeys: [String] = [],
    from: String = "employees e"
  ) -> String {
    EmployeeColumns.select(fields, sortKeys: sortKeys, from: from)
  }

  /// `select(fields)` by guid. Memoized: a point read should not rebuild its SQL text.
  static func pointRead(_ fields: EmployeeFields) -> String {
    if let sql = self.pointReads.withLock({ $0[fields] }) { return sql }
    let sql = self.select(fields) + " WHERE e.guid = ?"
    self.pointReads.withLock { $0[fields] = sql }
    return sql
  }

  private static let pointReads = Locked<[EmployeeFields: String]>([:])

  /// `select(fields)` by e-mail address (ASCII case folded, as `employees_by_email` is), the
  /// first created of those that share it.
  static func byEmail(_ fields: EmployeeFields) -> String {
    Self.select(fields) + " WHERE e.email = ? COLLATE NOCASE ORDER BY e.id LIMIT 1"
  }

  /// Reads the row `statement` is on (a cursor's current row over `select(fields)`), returning
  /// the employee and the index of the first sort-key column.
  static func decode(_ statement: SQLiteStatement, _ fields: EmployeeFields) -> (Employee, Int) {
    let (row, keyIndex) = Self.row(statement, fields)
    return (Employee(row), keyIndex)
  }

  /// The row `statement` is on as SQLite holds it, valid until the statement steps, and the
  /// index of the first sort-key column.
  ///
  /// Read with SQLite's C API, not through `Row`: each text is taken with the length SQLite
  /// gives (GRDB's `String(cString:)` measured it again and checked each column's type for
  /// NULL), and only the columns that can be NULL (`picture_etag`, and the thumbnail through
  /// its LEFT JOIN) are checked for it.
  static func row(_ statement: SQLiteStatement, _ fields: EmployeeFields) -> (EmployeeRow, Int) {
    var row = EmployeeRow()
    row.id = sqlite3_column_int64(statement, 0)
    var index: CInt = 1
    func text() -> UnsafeBufferPointer<UInt8> {
      defer { index += 1 }
      return Self.bytes(statement, index)
    }
    func integer() -> Int64 {
      defer { index += 1 }
      return sqlite3_column_int64(statement, index)
    }
    if fields.contains(.guid) { row.guid = text() }
    if fields.contains(.name) { row.name = text() }
    if fields.contains(.department) { row.department = text() }
    if fields.contains(.email) { row.email = text() }
    if fields.contains(.phone) { row.phone = text() }
    if fields.contains(.address) { row.address = text() }
    if fields.contains(.about) { row.about = text() }
    if fields.contains(.active) { row.active = integer() != 0 }
    if fields.contains(.startDate) { row.startDate = text() }
    if fields.contains(.vacationDays) { row.vacationDays = Int(integer()) }
    if fields.contains(.pictureEtag) {
      row.pictureEtag =
        sqlite3_column_type(statement, index) == SQLITE_NULL ? nil : Self.bytes(statement, index)
      index += 1
    }
    if fields.contains(.salesCount) { row.salesCount = integer() }
    if fields.contains(.updateTime) { row.updateTimeMillis = integer() }
    if fields.contains(.thumbnail) {
      if sqlite3_column_type(statement, index) != SQLITE_NULL {
        // A zero-length blob has no pointer: an empty thumbnail.
        let bytes = sqlite3_column_blob(statement, index)?.assumingMemoryBound(to: UInt8.self)
        row.thumbnail = UnsafeBufferPointer(
          start: bytes,
          count: Int(sqlite3_column_bytes(statement, index))
        )
      }
      index += 1
    }
    return (row, Int(index))
  }

  /// The text column `index` of the row `statement` is on ("" for NULL).
  static func text(_ statement: SQLiteStatement, _ index: CInt) -> String {
    String(decoding: Self.bytes(statement, index), as: UTF8.self)
  }

  /// The UTF-8 bytes of text column `index` of the row `statement` is on (none for NULL),
  /// valid until the statement steps.
  static func bytes(_ statement: SQLiteStatement, _ index: CInt) -> UnsafeBufferPointer<UInt8> {
    guard let bytes = sqlite3_column_text(statement, index) else {
      return UnsafeBufferPointer(start: nil, count: 0)
    }
    return UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, index)))
  }

  /// The sort keys of the row `statement` is on: its columns from `index` on.
  static func keys(_ statement: SQLiteStatement, from index: Int) -> [String] {
    (index ..< Int(sqlite3_column_count(statement))).map { Self.text(statement, CInt($0)) }
  }

  /// The columns that order a listing, most significant first (the row id comes last).
  static func sortKeys(_ order: EmployeeOrder) -> [String] {
    switch order {
    case .name: ["e.name_folded"]
    case .startDate: ["e.start_date"]
    case .department: ["e.department", "e.name_folded"]
    }
  }

  /// The distinct folded names (`employee_names`) that contain `text`, selecting `columns`:
  /// through the names' trigram index when the folded text has three characters or more,
  /// else by testing every distinct name. Either way the cost grows with the distinct names
  /// that match (or exist), never with the employees.
  static func matchingNames(
    _ text: String,
    selecting columns: String = "name_folded",
    from first: String? = nil
  ) -> (sql: String, arguments: [any DatabaseValueConvertible]) {
    let folded = TextFolding.fold(text)
    var sql: String
    var arguments: [any DatabaseValueConvertible]
    if folded.count >= Self.trigramLength {
      // The pattern is `+?`, not `?`: SQLite reads a bare parameter's value when it prepares
      // a GLOB (for its LIKE optimization), and then prepares the statement again after every
      // new binding, cached or not (`SQLITE_STMTSTATUS_REPREPARE`, `QueryPlanTests`), through
      // GRDB's authorizer: most of a search's cost when it finds few names. The trigram index
      // serves either.
      sql =
        "SELECT \(columns) FROM employee_names WHERE id IN "
        + "(SELECT rowid FROM employee_names_fts WHERE employee_names_fts.name_folded GLOB +?)"
      arguments = [TextFolding.containsPattern(text)]
    } else {
      sql = "SELECT \(columns) FROM employee_names WHERE \(Self.containsShort("name_folded"))"
      arguments = [folded]
    }
    if let first {
      sql += " AND name_folded >= ?"
      arguments.append(first)
    }
    return (sql, arguments)
  }

  /// The fewest folded characters the names' trigram index can look up; a shorter text is
  /// tested against the names one by one (`containsShort`).
  static let trigramLength = 3

  /// The test that a folded name (`column`) contains a folded text shorter than
  /// `trigramLength`, its one argument.
  static func containsShort(_ column: String) -> String {
    "instr(\(column), ?) > 0"
  }

  /// How a name filter meets the listing's order.
  enum NameAccess {
    /// The matching names drive the scan: their employees come from the (…, name_folded)
    /// indexes, in name order, or are sorted when the order is another one (few matches).
    case drive
    /// The order's index is walked and each row's name tested (many matches: the page
    /// fills after a few rows).
    case test
  }

  /// WHERE terms and their arguments for a filter.
  ///
  /// `names` says how a name filter is applied: driving the scan from the matching names
  /// (`e.name_folded IN (…)`), or only testing membership while another index is walked
  /// (`+e.name_folded IN (…)`, which the planner cannot use to drive).
  static func filterTerms(
    _ filter: EmployeeFilter,
    names: NameAccess = .drive,
    namesFrom first: String? = nil
  ) -> (terms: [String], arguments: [any DatabaseValueConvertible]) {
    var terms: [String] = []
    var arguments: [any DatabaseValueConvertible] = []
    if let department = filter.department {
      terms.append("e.department = ?")
      arguments.append(department)
    }
    if let active = filter.active {
      terms.append("e.active = ?")
      arguments.append(active)
    }
    if let text = filter.nameContains {
      let matching = self.matchingNames(text, from: first)
      let column = names == .drive ? "e.name_folded" : "+e.name_folded"
      terms.append("\(column) IN (\(matching.sql))")
      arguments += matching.arguments
    }
    return (terms, arguments)
  }

  /// The SQL and arguments of one keyset page: rows strictly after `cursor`, in order.
  ///
  /// A name filter drives the scan in name order, which the matching names' employees come
  /// in. In another order it drives only when `few` says the matches are few enough to sort
  /// (`SQLiteStore.fewNameMatches`); otherwise the order's index is walked and tested.
  static func page(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int,
    few: Bool = false
  ) -> (sql: String, arguments: StatementArguments) {
    if order == .name, let folded = filter.nameContains.map(TextFolding.fold),
      folded.count < Self.trigramLength
    {
      return self.shortNamePage(folded, fields: fields, filter: filter, after: cursor, limit: limit)
    }
    let keys = self.sortKeys(order)
    // With one department filtered, "department, then name" is just "name": saying so lets
    // the planner walk the (department, …, name) index without a sort.
    let dropped = order == .department && filter.department != nil ? 1 : 0
    let orderKeys = Array(keys.dropFirst(dropped)) + ["e.id"]
    let names: NameAccess = order == .name || few ? .drive : .test
    let driven = filter.nameContains != nil && names == .drive
    // When the names drive, the cursor's columns are written as expressions (`+column`), so
    // the planner reads the rows through the names instead of walking an index from the
    // cursor; in name order the names themselves start at the cursor's. Outside name order,
    // so are the ORDER BY's, and the few matches are sorted.
    let expressions = orderKeys.map { $0 == "e.id" ? $0 : "+" + $0 }
    let first = driven && order == .name ? cursor?.keys.first : nil
    var (terms, arguments) = self.filterTerms(filter, names: names, namesFrom: first)
    if let cursor {
      let marks = Array(repeating: "?", count: orderKeys.count).joined(separator: ", ")
      terms.append("(\((driven ? expressions : orderKeys).joined(separator: ", "))) > (\(marks))")
      arguments += cursor.keys.dropFirst(dropped).map { $0 as any DatabaseValueConvertible }
      arguments.append(cursor.id)
    }
    var sql = self.select(fields, sortKeys: keys)
    if !terms.isEmpty {
      sql += " WHERE " + terms.joined(separator: " AND ")
    }
    let sorted = driven && order != .name ? expressions : orderKeys
    sql += " ORDER BY " + sorted.joined(separator: ", ") + " LIMIT ?"
    arguments.append(limit)
    return (sql, StatementArguments(arguments))
  }

  /// A page in name order of a name filter (`folded`) too short for the trigram index: the
  /// distinct names walked in order (`employee_names`), each tested, and each match's employees
  /// read through the (…, name_folded) indexes, until the page is full. A common letter fills
  /// it from the first names; `IN (…)` first collected every matching name.
  static func shortNamePage(
    _ folded: String,
    fields: EmployeeFields,
    filter: EmployeeFilter,
    after cursor: EmployeeCursor?,
    limit: Int
  ) -> (sql: String, arguments: StatementArguments) {
    var others = filter
    others.nameContains = nil
    var (terms, arguments) = self.filterTerms(others)
    terms.append(Self.containsShort("n.name_folded"))
    arguments.append(folded)
    if let cursor, let name = cursor.keys.first {
      // The first term starts the walk of the names at the cursor's (the row value spans two
      // tables, so no index serves it); the second starts the page after the cursor's row.
      terms.append("n.name_folded >= ?")
      terms.append("(n.name_folded, e.id) > (?, ?)")
      arguments += [name, name, cursor.id]
    }
    var sql = self.select(
      fields,
      sortKeys: self.sortKeys(.name),
      from: "employee_names n CROSS JOIN employees e ON e.name_folded = n.name_folded"
    )
    sql += " WHERE " + terms.joined(separator: " AND ") + " ORDER BY n.name_folded, e.id LIMIT ?"
    arguments.append(limit)
    return (sql, StatementArguments(arguments))
  }

  /// The SQL and arguments that count the rows matching `filter`.
  static func count(_ filter: EmployeeFilter) -> (sql: String, arguments: StatementArguments) {
    if let text = filter.nameContains, filter.department == nil {
      // The names keep their employee counts, and their active employees'.
      let counted = filter.active.map { $0 ? "active" : "employees - active" } ?? "employees"
      let matching = self.matchingNames(text, selecting: "coalesce(sum(\(counted)), 0)")
      return (matching.sql, StatementArguments(matching.arguments))
    }
    let (terms, arguments) = self.filterTerms(filter)
    var sql = "SELECT count(*) FROM employees e"
    if !terms.isEmpty {
      sql += " WHERE " + terms.joined(separator: " AND ")
    }
    return (sql, StatementArguments(arguments))
  }
}
