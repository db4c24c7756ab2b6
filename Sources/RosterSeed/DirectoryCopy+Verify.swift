internal import RosterDomain
public import RosterStore

extension DirectoryCopy {
  /// What `verify` found: how much it compared, and each difference (the first `limit`).
  public struct Verification: Sendable {
    public var employees = 0
    public var departments = 0
    public var sales: Int64 = 0
    /// The differences found, up to the limit.
    public var differences: [String] = []
    /// Every difference, listed or not.
    public var differenceCount = 0

    mutating func differ(_ text: String, limit: Int) {
      self.differenceCount += 1
      if self.differences.count < limit { self.differences.append(text) }
    }
  }

  /// Compares `target` with `source` after a copy: the employee count, every employee's
  /// fields (pictures by content hash, thumbnails by their bytes, the sales counter with
  /// them), the department counters, and the sales calendars of everyone and of each
  /// department by year and month. Reads a page at a time from each side.
  public func verify(
    source: some StoreBackend,
    target: some StoreBackend,
    limit: Int = 20
  ) async throws -> Verification {
    var result = Verification()
    let counts = (
      try await source.countEmployees(filter: EmployeeFilter()),
      try await target.countEmployees(filter: EmployeeFilter())
    )
    if counts.0 != counts.1 {
      result.differ("employees: \(counts.0) in the source, \(counts.1) in the target", limit: limit)
    }

    var cursor: EmployeeCursor? = nil
    let fields = EmployeeFields.all.subtracting(.updateTime)
    repeat {
      let page = try await source.employeePage(
        fields: fields,
        filter: EmployeeFilter(),
        order: .name,
        after: cursor,
        limit: self.employeePage
      )
      cursor = page.next
      result.employees += page.employees.count
      let there: [Employee]
      do {
        there = try await target.employees(guids: page.employees.map(\.guid), fields: fields)
      } catch let error as StoreError where error.code == .notFound {
        result.differ("employees: \(error.message) in the target", limit: limit)
        continue
      }
      for (mine, theirs) in zip(page.employees, there) {
        var (a, b) = (mine, theirs)
        (a.id, b.id) = (0, 0)
        if a != b {
          result.differ("employee \(mine.guid): \(Self.fieldsDiffering(a, b))", limit: limit)
        }
      }
    } while cursor != nil

    let departments = (try await source.departmentCounts(), try await target.departmentCounts())
    result.departments = departments.0.count
    if departments.0 != departments.1 {
      let differing = Set(departments.0).symmetricDifference(departments.1).map(\.department)
      result.differ(
        "department counters differ: \(Set(differing).sorted().joined(separator: ", "))",
        limit: limit
      )
    }

    var scopes: [SalesScope] = [.everyone]
    scopes += departments.0.map { .department($0.department) }
    for scope in scopes {
      let calendars = (
        try await source.salesCalendar(scope: scope, year: nil, month: nil),
        try await target.salesCalendar(scope: scope, year: nil, month: nil)
      )
      if scope == .everyone { result.sales = calendars.0.years.reduce(0) { $0 + $1.year.count } }
      if calendars.0 != calendars.1 {
        let differing = Set(calendars.0.years).symmetricDifference(calendars.1.years).map(
          \.year.number
        )
        result.differ(
          "sales of \(Self.describe(scope)) differ in \(Set(differing).sorted().map(String.init).joined(separator: ", "))",
          limit: limit
        )
      }
    }
    return result
  }

  static func describe(_ scope: SalesScope) -> String {
    switch scope {
    case .everyone: "everyone"
    case .department(let name): "department '\(name)'"
    case .employee(let guid): "employee \(guid)"
    }
  }

  /// The names of the fields in which `a` and `b` differ.
  static func fieldsDiffering(_ a: Employee, _ b: Employee) -> String {
    var names: [String] = []
    if a.name != b.name { names.append("name") }
    if a.department != b.department { names.append("department") }
    if a.email != b.email { names.append("email") }
    if a.phone != b.phone { names.append("phone") }
    if a.address != b.address { names.append("address") }
    if a.about != b.about { names.append("about") }
    if a.active != b.active { names.append("active") }
    if a.startDate != b.startDate { names.append("start date") }
    if a.vacationDays != b.vacationDays { names.append("vacation days") }
    if a.thumbnail != b.thumbnail { names.append("thumbnail") }
    if a.pictureEtag != b.pictureEtag { names.append("picture") }
    if a.salesCount != b.salesCount {
      names.append("sales count (\(a.salesCount) and \(b.salesCount))")
    }
    return names.joined(separator: ", ")
  }
}
