internal import Foundation
internal import RosterDomain
internal import RosterStore

/// The counters and rollups a backend keeps as it writes, against recounts of what was
/// written, after a random mix of every kind of write that moves them.
extension StoreContract {
  static func countersMatchRecounts(_ store: Store) async throws {
    var random = SplitMix64(seed: 2_024_11_24)
    var employees = try await Self.create(store, Self.names)
    let departments = ["Sales", "Design", "Engineering", "Legal"]
    // Sales, as the model keeps them: owner guid, cents, date.
    var sales: [(guid: String, cents: Int64, date: String)] = []
    func addSales(_ count: Int) async throws {
      var batch: [SaleRow] = []
      for _ in 0 ..< count {
        let owner = employees[Int(random.next() % UInt64(employees.count))].guid
        let date = String(
          format: "202%d-%02d-%02d",
          2 + random.next() % 3,
          1 + random.next() % 12,
          1 + random.next() % 28
        )
        let sale = SaleRow(
          employeeGUID: owner,
          amountCents: Int64(random.next() % 50_000),
          date: date
        )
        batch.append(sale)
        sales.append((owner, sale.amountCents, date))
      }
      let result = try await store.importSales(
        Self.stream([batch]),
        context: Self.writer,
        chunkRows: 37
      )
      try Self.require(
        result.inserted == count && result.rejected.isEmpty,
        "sales import: \(result)"
      )
    }
    try await addSales(300)
    for step in 0 ..< 40 {
      let index = Int(random.next() % UInt64(employees.count))
      switch step % 5 {
      case 0, 1:
        var changes = EmployeeChanges()
        // Step 0 keeps the department, sometimes: an update of the counted columns alone
        // (PostgreSQL's prepared `EmployeeUpdate`).
        if step % 5 == 1 || random.next() % 2 == 0 {
          changes.department = departments[Int(random.next() % 4)]
        }
        changes.active = random.next() % 2 == 0
        changes.vacationDays = Int(random.next() % 30)
        if step % 5 == 1 {
          // A rename, sometimes to a name another employee has.
          changes.name =
            Self.names[Int(random.next() % UInt64(Self.names.count))]
            + (random.next() % 2 == 0 ? "" : " Jr")
        }
        employees[index] = try await store.updateEmployee(
          guid: employees[index].guid,
          changes: changes,
          context: Self.writer
        )
      case 2:
        let gone = employees.remove(at: index)
        try await store.deleteEmployee(guid: gone.guid, context: Self.writer)
        sales.removeAll { $0.guid == gone.guid }
      case 3:
        var changes = EmployeeChanges()
        changes.vacationDays = Int(random.next() % 30)
        // Sometimes the active flag too, which the names' counters follow.
        if random.next() % 2 == 0 { changes.active = random.next() % 2 == 0 }
        let department = departments[Int(random.next() % 4)]
        _ = try await store.batchUpdateEmployees(
          filter: EmployeeFilter(department: department),
          changes: changes,
          context: Self.writer
        )
        for position in employees.indices where employees[position].department == department {
          employees[position].vacationDays = changes.vacationDays!
          employees[position].active = changes.active ?? employees[position].active
        }
      default:
        try await addSales(20)
        let cutoff = String(format: "2022-%02d-01", 1 + random.next() % 12)
        _ = try await store.deleteSales(before: cutoff, limit: 1_000_000, context: Self.writer)
        sales.removeAll { $0.date < cutoff }
      }
    }
    // Department counters against the employees.
    var expected: [String: DepartmentCounts] = [:]
    for employee in employees {
      var counts =
        expected[employee.department]
        ?? DepartmentCounts(
          department: employee.department,
          headcount: 0,
          active: 0,
          vacationDaysTotal: 0
        )
      counts.headcount += 1
      counts.active += employee.active ? 1 : 0
      counts.vacationDaysTotal += Int64(employee.vacationDays)
      expected[employee.department] = counts
    }
    let counted = try await store.departmentCounts()
    try Self.require(
      counted == expected.keys.sorted().map { expected[$0]! },
      "department counters \(counted), recounted \(expected)"
    )
    // Counts by name, of everyone and of the (in)active (both backends answer them from their
    // employees-per-name counters).
    for fragment in ["a", "jo", "JR", "ø", "nun", "łęc", "zz"] {
      for active in [nil, true, false] {
        let folded = TextFolding.fold(fragment)
        let recounted = employees.count {
          TextFolding.fold($0.name).contains(folded) && (active == nil || $0.active == active)
        }
        let counted = try await store.countEmployees(
          filter: EmployeeFilter(active: active, nameContains: fragment)
        )
        try Self.require(
          counted == Int64(recounted),
          "employees named like '\(fragment)', active \(String(describing: active)): \(counted), recounted \(recounted)"
        )
      }
    }
    // Each employee's sales counters.
    for employee in employees {
      let mine = sales.filter { $0.guid == employee.guid }
      let stored = try await store.employeeSales(guid: employee.guid)
      try Self.require(
        stored.count == Int64(mine.count) && stored.totalCents == mine.map(\.cents).reduce(0, +),
        "\(employee.name)'s sales \(stored), recounted \(mine.count)"
      )
    }
    // Sums by department (the monthly rollups) and the calendar's months over everyone.
    let departmentOf = Dictionary(uniqueKeysWithValues: employees.map { ($0.guid, $0.department) })
    var byDepartment: [String: Int64] = [:]
    var byMonth: [String: (Int64, Int64)] = [:]
    for sale in sales {
      byDepartment[departmentOf[sale.guid]!, default: 0] += sale.cents
      let month = String(sale.date.prefix(7))
      byMonth[month] = ((byMonth[month]?.0 ?? 0) + 1, (byMonth[month]?.1 ?? 0) + sale.cents)
    }
    let sums = try await store.aggregateSales(
      .sum,
      groupedBy: .department,
      filter: SalesFilter(),
      page: AggregatePageRequest()
    )
    try Self.require(
      sums.groups.map(\.key) == byDepartment.keys.sorted()
        && sums.groups.map(\.value) == byDepartment.keys.sorted().map { Double(byDepartment[$0]!) },
      "sums by department \(sums.groups), recounted \(byDepartment)"
    )
    let calendar = try await store.salesCalendar(scope: .everyone, year: nil, month: nil)
    let months = calendar.years.flatMap { year in
      year.months.map {
        (String(format: "%04d-%02d", year.year.number, $0.number), $0.count, $0.amountCents)
      }
    }
    try Self.require(
      months.map(\.0) == byMonth.keys.sorted()
        && months.map { [$0.1, $0.2] }
          == byMonth.keys.sorted().map { [byMonth[$0]!.0, byMonth[$0]!.1] },
      "calendar months \(months), recounted \(byMonth.sorted { $0.key < $1.key })"
    )
    try await Self.aggregatesMatchModel(store, sales: sales, departmentOf: departmentOf)
  }
}
