import RosterProto

/// Renders employees as a plain-text table for people.
enum EmployeeTable {
  static func render(_ employees: [Roster_V1_Employee], detailed: Bool = false) -> String {
    var columns: [(String, (Roster_V1_Employee) -> String)] = [
      ("GUID", \.guid),
      ("NAME", \.name),
      ("DEPARTMENT", \.department),
      ("ACTIVE", { $0.active ? "yes" : "no" }),
      ("START", \.startDate),
      ("EMAIL", \.email),
    ]
    if detailed {
      columns += [
        ("PHONE", \.phone), ("VACATION", { String($0.vacationDays) }),
        ("PICTURE", { $0.hasPicture_p ? "yes" : "no" }), ("SALES", { String($0.salesCount) }),
      ]
    }
    let rows = employees.map { employee in columns.map { $0.1(employee) } }
    let widths = columns.indices.map { index in
      ([columns[index].0] + rows.map { $0[index] }).map(\.count).max() ?? 0
    }
    func line(_ cells: [String]) -> String {
      zip(cells, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }
        .joined(separator: "  ")
    }
    return ([line(columns.map(\.0))] + rows.map(line)).joined(separator: "\n")
  }
}
