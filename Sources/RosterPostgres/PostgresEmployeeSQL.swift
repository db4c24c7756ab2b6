internal import NIOCore
internal import PostgresNIO
internal import RosterDomain
internal import RosterStore

/// SQL text with numbered parameters, built piece by piece.
struct SQLBuilder {
  var sql = ""
  var binds = PostgresBindings()

  init(_ sql: String = "") {
    self.sql = sql
  }

  /// Binds `value` and returns its placeholder (`$n`).
  mutating func bind<Value: PostgresNonThrowingEncodable>(_ value: Value) -> String {
    self.binds.append(value)
    return "$\(self.binds.count)"
  }

  var query: PostgresQuery { PostgresQuery(unsafeSQL: self.sql, binds: self.binds) }
}

/// Builds the SQL of every employee read from a field set, a filter and an order, as
/// `EmployeeSQL` does for SQLite: only the requested columns, the thumbnail table joined only
/// when asked for, one keyset range scan per page.
enum PostgresEmployeeSQL {
  /// `EmployeeColumns.select`: the statement every read starts from.
  static func select(_ fields: EmployeeFields, sortKeys: [String] = []) -> String {
    EmployeeColumns.select(fields, sortKeys: sortKeys)
  }

  /// Reads a row produced by `select(fields)`, returning the employee and the index of the
  /// first sort-key column.
  static func decode(
    _ row: PostgresRandomAccessRow,
    _ fields: EmployeeFields
  ) throws -> (Employee, Int) {
    var employee = Employee()
    employee.id = try row[0].decode(Int64.self)
    var index = 1
    func next<T: PostgresDecodable>(_: T.Type = T.self) throws -> T {
      defer { index += 1 }
      return try row[index].decode(T.self)
    }
    if fields.contains(.guid) { employee.guid = try next() }
    if fields.contains(.name) { employee.name = try next() }
    if fields.contains(.department) { employee.department = try next() }
    if fields.contains(.email) { employee.email = try next() }
    if fields.contains(.phone) { employee.phone = try next() }
    if fields.contains(.address) { employee.address = try next() }
    if fields.contains(.about) { employee.about = try next() }
    if fields.contains(.active) { employee.active = try next() }
    if fields.contains(.startDate) { employee.startDate = try next() }
    if fields.contains(.vacationDays) { employee.vacationDays = try next() }
    if fields.contains(.pictureEtag) { employee.pictureEtag = try next(String?.self) }
    if fields.contains(.salesCount) { employee.salesCount = try next() }
    if fields.contains(.updateTime) { employee.updateTimeMillis = try next() }
    if fields.contains(.thumbnail) {
      employee.thumbnail = try next(ByteBuffer?.self).map { Array($0.readableBytesView) }
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

  /// A LIKE pattern for folded names containing `text`, with LIKE's specials escaped.
  static func containsPattern(_ text: String) -> String {
    var pattern = "%"
    for character in TextFolding.fold(text) {
      if character == "%" || character == "_" || character == "\\" { pattern.append("\\") }
      pattern.append(character)
    }
    return pattern + "%"
  }

  /// WHERE terms for a filter, binding their values into `builder`.
  static func filterTerms(_ filter: EmployeeFilter, into builder: inout SQLBuilder) -> [String] {
    var terms: [String] = []
    if let department = filter.department {
      terms.append("e.department = \(builder.bind(department))")
    }
    if let active = filter.active {
      terms.append("e.active = \(builder.bind(active))")
    }
    if let text = filter.nameContains {
      terms.append(self.nameTerm(text, into: &builder))
    }
    return terms
  }

  /// The term of a name filter on the employees. A folded text of three characters or more
  /// is a `LIKE` the names' trigram index serves; a shorter one holds no trigram, and that
  /// index would be read whole for it (its rows are most of the employees, or none), so it
  /// is a `strpos` no index serves: the filter's other terms choose the rows (a department's
  /// index), and each name is tested. SQLite's `matchingNames` makes the same split.
  static func nameTerm(_ text: String, into builder: inout SQLBuilder) -> String {
    let folded = TextFolding.fold(text)
    guard folded.count >= 3 else { return "strpos(e.name_folded, \(builder.bind(folded))) > 0" }
    return "e.name_folded LIKE \(builder.bind(self.containsPattern(text)))"
  }

  /// One keyset page: rows strictly after `cursor`, in order, at most `limit`.
  static func page(
    fields: EmployeeFields,
    filter: EmployeeFilter,
    order: EmployeeOrder,
    after cursor: EmployeeCursor?,
    limit: Int
  ) -> PostgresQuery {
    if order == .name, let text = filter.nameContains {
      return self.namePage(text, fields: fields, filter: filter, after: cursor, limit: limit)
    }
    let keys = self.sortKeys(order)
    // With one department filtered, "department, then name" is just "name".
    let dropped = order == .department && filter.department != nil ? 1 : 0
    let orderKeys = Array(keys.dropFirst(dropped)) + ["e.id"]
    var builder = SQLBuilder()
    var terms = self.filterTerms(filter, into: &builder)
    if let cursor {
      var marks = cursor.keys.dropFirst(dropped).map { builder.bind($0) }
      marks.append(builder.bind(cursor.id))
      terms.append("(\(orderKeys.joined(separator: ", "))) > (\(marks.joined(separator: ", ")))")
    }
    builder.sql = self.select(fields, sortKeys: keys)
    if !terms.isEmpty {
      builder.sql += " WHERE " + terms.joined(separator: " AND ")
    }
    builder.sql +=
      " ORDER BY " + orderKeys.joined(separator: ", ") + " LIMIT \(builder.bind(limit))"
    return builder.query
  }

  /// The test of which distinct names (`name_counts`) contain `text`, binding its pattern: the
  /// one statement of it for a name page and a count, as SQLite's `matchingNames`.
  static func namesMatching(_ text: String, into builder: inout SQLBuilder) -> String {
    "name_folded LIKE \(builder.bind(self.containsPattern(text)))"
  }

  /// A name search in name order, through the distinct names (`name_counts`, as SQLite's
  /// `employee_names`): the names that match, in order, then each name's employees by index,
  /// until the page is full. Walking the employees in name order and testing each instead
  /// visited every employee for a pattern few names hold ("zz": hundreds of ms at 1M).
  ///
  /// The names are walked one at a time down their index (a recursive query: each step the
  /// first matching name after the one before), so the walk stops with the page. As
  /// `SELECT DISTINCT … ORDER BY`, PostgreSQL read and sorted every matching name first once
  /// the table was compact (most of a page's time for one common letter), and read the whole
  /// index while it was not. There is no outer ORDER BY: the names come in order,
  /// and the nested loop hands each name's employees over in id order (the inner ORDER BY),
  /// so rows come in (name, id) order and the LIMIT stops the loop once the page is full; a
  /// sort on top would read every matching name's employees first.
  private static func namePage(
    _ text: String,
    fields: EmployeeFields,
    filter: EmployeeFilter,
    after cursor: EmployeeCursor?,
    limit: Int
  ) -> PostgresQuery {
    var builder = SQLBuilder()
    // Each step must take the next matching name down their index. PostgreSQL expects few
    // names to match a pattern, and for that reads every name after the last one and sorts
    // the matches instead (a bitmap scan and a top-1 sort: docs/performance.md). In a CASE
    // the pattern is a condition it cannot estimate (half the rows, it takes), so the index
    // walk in order is the cheaper plan to it, as it is in fact.
    let matching = "CASE WHEN \(self.namesMatching(text, into: &builder)) THEN true ELSE false END"
    var firstTerms = [matching]
    var rowTerms = ["e.name_folded = n.name_folded"]
    if let department = filter.department {
      rowTerms.append("e.department = \(builder.bind(department))")
    }
    if let active = filter.active { rowTerms.append("e.active = \(builder.bind(active))") }
    if let cursor, let name = cursor.keys.first {
      let nameMark = builder.bind(name)
      firstTerms.append("name_folded >= \(nameMark)")
      rowTerms.append("(e.name_folded, e.id) > (\(nameMark), \(builder.bind(cursor.id)))")
    }
    let limitMark = builder.bind(limit)
    builder.sql = """
      WITH RECURSIVE n(name_folded) AS (
        (SELECT name_folded FROM name_counts WHERE \(firstTerms.joined(separator: " AND ")) ORDER BY name_folded LIMIT 1)
        UNION ALL
        SELECT (
          SELECT name_folded FROM name_counts WHERE name_folded > n.name_folded AND \(matching)
          ORDER BY name_folded LIMIT 1
        ) FROM n WHERE n.name_folded IS NOT NULL
      )
      SELECT x.* FROM n
      CROSS JOIN LATERAL (
        \(self.select(fields, sortKeys: ["e.name_folded"])) WHERE \(rowTerms.joined(separator: " AND "))
        ORDER BY e.id LIMIT \(limitMark)
      ) x
      LIMIT \(limitMark)
      """
    return builder.query
  }

  /// Counts the rows matching `filter`. With a name filter, from the distinct names that
  /// match (`name_counts`, as SQLite's `employee_names`): without a department, their
  /// counters (and their active employees'); in a department, each name's employees there,
  /// counted in the (department, [active,] name) indexes. Either way the cost grows with the
  /// matching names and their employees in the department, never with every employee the
  /// name matches: testing `department = $1 AND name_folded LIKE …` let PostgreSQL fetch every
  /// employee of a common fragment from the heap through the trigram index, most of them in
  /// other departments (docs/performance.md, "Reads as a client sees them").
  static func count(_ filter: EmployeeFilter) -> PostgresQuery {
    var builder = SQLBuilder()
    if let text = filter.nameContains {
      let matching = self.namesMatching(text, into: &builder)
      guard let department = filter.department else {
        let counted = filter.active.map { $0 ? "active" : "employees - active" } ?? "employees"
        builder.sql = "SELECT coalesce(sum(\(counted)), 0)::int8 FROM name_counts WHERE \(matching)"
        return builder.query
      }
      let names = "SELECT DISTINCT name_folded FROM name_counts WHERE \(matching)"
      var terms = ["e.department = \(builder.bind(department))", "e.name_folded = n.name_folded"]
      if let active = filter.active { terms.append("e.active = \(builder.bind(active))") }
      builder.sql = """
        SELECT coalesce(sum(x.employees), 0)::int8 FROM (\(names)) n
        CROSS JOIN LATERAL (
          SELECT count(*) AS employees FROM employees e WHERE \(terms.joined(separator: " AND "))
        ) x
        """
      return builder.query
    }
    let terms = self.filterTerms(filter, into: &builder)
    builder.sql = "SELECT count(*) FROM employees e"
    if !terms.isEmpty {
      builder.sql += " WHERE " + terms.joined(separator: " AND ")
    }
    return builder.query
  }
}
