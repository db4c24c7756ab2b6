public import RosterDomain

/// The columns behind each employee field, in the fixed order both SQL backends select and
/// decode them (`e` is the employees table, `t` the thumbnails).
package enum EmployeeColumns {
  package static let selected: [(EmployeeFields, String)] = [
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

  /// `SELECT e.id, <fields>[, <sort keys>] FROM employees e [LEFT JOIN thumbnails]`: only the
  /// columns behind `fields`, and the thumbnail table only when the thumbnail is asked for.
  /// `from`: what the employees `e` are read from, when not their table alone (a join).
  package static func select(
    _ fields: EmployeeFields,
    sortKeys: [String] = [],
    from: String = "employees e"
  ) -> String {
    var list = ["e.id"]
    for (field, column) in Self.selected where fields.contains(field) {
      list.append(column)
    }
    list += sortKeys
    var sql = "SELECT " + list.joined(separator: ", ") + " FROM " + from
    if fields.contains(.thumbnail) {
      sql += " LEFT JOIN employee_thumbnails t ON t.employee_id = e.id"
    }
    return sql
  }
}
