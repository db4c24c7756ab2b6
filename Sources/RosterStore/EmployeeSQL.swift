internal import GRDB
internal import Synchronization

/// Builds the SQL of every employee read from a field set, a filter and an order.
///
/// The SELECT list holds only the columns behind the requested fields (plus the sort keys a
/// cursor needs), and the thumbnail table is joined only when the thumbnail is asked for.
enum EmployeeSQL {
  /// Requested columns in the fixed order `decode` reads them back.
  private static let columns: [(EmployeeFields, String)] = [
    (.guid, "e.guid"),
    (.name, "e.name"),
    (.department, "e.department"),
    (.email, "e.email"),
    (.phone, "e.phone"),
    (.address, "e.address"),
    (.about, "e.about"),
    (.active, "e.active"),
    (.startDate, "e.start_date"),
    (.vacationDays, "e.vacation_days"),
    (.pictureEtag, "e.picture_etag"),
    (.salesCount, "e.sales_count"),
    (.updateTime, "e.update_time"),
    (.thumbnail, "t.data"),
  ]

  /// `SELECT e.id, <fields>[, <sort keys>] FROM employees e [LEFT JOIN thumbnails]`.
  static func select(_ fields: EmployeeFields, sortKeys: [String] = []) -> String {
    var list = ["e.id"]
    for (field, column) in self.columns where fields.contains(field) {
      list.append(column)
    }
    list += sortKeys
    var sql = "SELECT " + list.joined(separator: ", ") + " FROM employees e"
    if fields.contains(.thumbnail) {
      sql += " LEFT JOIN employee_thumbnails t ON t.employee_id = e.id"
    }
    return sql
  }

  /// `select(fields)` by guid. Memoized: a point read should not rebuild its SQL text.
  static func pointRead(_ fields: EmployeeFields) -> String {
    if let sql = self.pointReads.withLock({ $0[fields] }) { return sql }
    let sql = self.select(fields) + " WHERE e.guid = ?"
    self.pointReads.withLock { $0[fields] = sql }
    return sql
  }

  private static let pointReads = Mutex<[EmployeeFields: String]>([:])

  /// Reads a row produced by `select(fields)`, returning the employee and the index of the
  /// first sort-key column.
  static func decode(_ row: Row, _ fields: EmployeeFields) throws -> (Employee, Int) {
    var employee = Employee()
    employee.id = row[0]
    var index = 1
    func next<T: DatabaseValueConvertible & StatementColumnConvertible>() -> T {
      defer { index += 1 }
      return row[index]
    }
    if fields.contains(.guid) { employee.guid = next() }
    if fields.contains(.name) { employee.name = next() }
    if fields.contains(.department) { employee.department = next() }
    if fields.contains(.email) { employee.email = next() }
    if fields.contains(.phone) { employee.phone = next() }
    if fields.contains(.address) { employee.address = next() }
    if fields.contains(.about) { employee.about = next() }
    if fields.contains(.active) { employee.active = next() }
    if fields.contains(.startDate) { employee.startDate = next() }
    if fields.contains(.vacationDays) { employee.vacationDays = next() }
    if fields.contains(.pictureEtag) {
      employee.pictureEtag = row[index]
      index += 1
    }
    if fields.contains(.salesCount) { employee.salesCount = next() }
    if fields.contains(.updateTime) { employee.updateTimeMillis = next() }
    if fields.contains(.thumbnail) {
      let data: [UInt8]? = try row.withUnsafeData(atIndex: index) { data in data.map { [UInt8]($0) } }
      employee.thumbnail = data
      index += 1
    }
    return (employee, index)
  }

  /// The columns that order a listing, most significant first (the row id comes last).
  static func sortKeys(_ order: EmployeeOrder) -> [String] {
    switch order {
    case .name: ["e.name_folded"]
    case .startDate: ["e.start_date"]
    case .department: ["e.department", "e.name_folded"]
    }
  }

  /// WHERE terms and their arguments for a filter.
  ///
  /// `ordered` marks a listing that must walk an ordered index: the search term is then
  /// written `+e.id IN (…)` so the planner checks membership instead of driving the scan
  /// from the search results, which would need a temp B-tree to sort.
  static func filterTerms(
    _ filter: EmployeeFilter,
    ordered: Bool
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
      let membership = ordered ? "+e.id" : "e.id"
      terms.append(
        "\(membership) IN (SELECT rowid FROM employees_fts WHERE employees_fts.name_folded GLOB ?)"
      )
      arguments.append(TextFolding.containsPattern(text))
    }
    return (terms, arguments)
  }

  /// The SQL and arguments of one keyset page: rows strictly after `cursor`, in order.
  static func page(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int
  ) -> (sql: String, arguments: StatementArguments) {
    let keys = self.sortKeys(order)
    // With one department filtered, "department, then name" is just "name": saying so lets
    // the planner walk the (department, …, name) index without a sort.
    let dropped = order == .department && filter.department != nil ? 1 : 0
    let orderKeys = Array(keys.dropFirst(dropped)) + ["e.id"]
    var (terms, arguments) = self.filterTerms(filter, ordered: true)
    if let cursor {
      let marks = Array(repeating: "?", count: orderKeys.count).joined(separator: ", ")
      terms.append("(\(orderKeys.joined(separator: ", "))) > (\(marks))")
      arguments += cursor.keys.dropFirst(dropped).map { $0 as any DatabaseValueConvertible }
      arguments.append(cursor.id)
    }
    var sql = self.select(fields, sortKeys: keys)
    if !terms.isEmpty {
      sql += " WHERE " + terms.joined(separator: " AND ")
    }
    sql += " ORDER BY " + orderKeys.joined(separator: ", ") + " LIMIT ?"
    arguments.append(limit)
    return (sql, StatementArguments(arguments))
  }

  /// The SQL and arguments that count the rows matching `filter`.
  static func count(_ filter: EmployeeFilter) -> (sql: String, arguments: StatementArguments) {
    if let text = filter.nameContains, filter.department == nil, filter.active == nil {
      return (
        "SELECT count(*) FROM employees_fts WHERE name_folded GLOB ?",
        [TextFolding.containsPattern(text)]
      )
    }
    let (terms, arguments) = self.filterTerms(filter, ordered: false)
    var sql = "SELECT count(*) FROM employees e"
    if !terms.isEmpty {
      sql += " WHERE " + terms.joined(separator: " AND ")
    }
    return (sql, StatementArguments(arguments))
  }
}
