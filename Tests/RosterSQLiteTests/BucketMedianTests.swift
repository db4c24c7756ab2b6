import Foundation
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite

/// Medians from the amount buckets: the date ranges they split, the buckets, and the
/// medians against a reference over ranges a date picker sends, through writes that move
/// and delete sales.
@Suite("Bucket medians", .timeLimit(.minutes(10)))
struct BucketMedianTests {
  @Test("a bucket holds the amounts with the same digit count and first two digits, in order")
  func buckets() {
    #expect(AmountBuckets.bucket(of: 0) == 100)
    #expect(AmountBuckets.bucket(of: 7) == 107)
    #expect(AmountBuckets.bucket(of: 42) == 242)
    #expect(AmountBuckets.bucket(of: 31_250) == 531)
    #expect(AmountBuckets.amounts(in: 531) == 31_000 ... 31_999)
    #expect(AmountBuckets.amounts(in: 242) == 42 ... 42)
    #expect(AmountBuckets.amounts(in: 107) == 7 ... 7)
    var random = SplitMix64(seed: 3)
    var previous: (amount: Int64, bucket: Int) = (0, 100)
    for amount
      in ((0 ..< 2_000).map { _ in Int64(random.next() % 100_000_000_000) } + [99, 100, 999, 1_000])
      .sorted()
    {
      let bucket = AmountBuckets.bucket(of: amount)
      #expect(AmountBuckets.amounts(in: bucket).contains(amount), "\(amount) in \(bucket)")
      #expect(
        bucket >= previous.bucket,
        "buckets sort as amounts: \(previous) then \(amount), \(bucket)"
      )
      previous = (amount, bucket)
    }
  }

  @Test("the middle ranks fall in the right buckets")
  func middle() {
    let odd = AmountBuckets.middle(of: [100: 2, 531: 3])
    #expect(odd.map(\.bucket) == [531] && odd.map(\.offset) == [0])
    let even = AmountBuckets.middle(of: [100: 2, 531: 2, 600: 4])
    #expect(even.map(\.bucket) == [531, 600] && even.map(\.offset) == [1, 0])
    let inOne = AmountBuckets.middle(of: [100: 1, 600: 4, 700: 1])
    #expect(inOne.map(\.bucket) == [600, 600] && inOne.map(\.offset) == [1, 2])
    let split = AmountBuckets.middle(of: [100: 3, 531: 3])
    #expect(split.map(\.bucket) == [100, 531] && split.map(\.offset) == [2, 0])
    #expect(AmountBuckets.middle(of: [:]).isEmpty)
  }

  @Test("a range splits into whole years, whole months and the days of partial months")
  func periods() {
    let wide = SalesPeriods(from: "2019-03-05", to: "2024-02-10")
    #expect(wide.years?.first == "2020" && wide.years?.last == "2023")
    #expect(
      wide.months.map { [$0.first, $0.last] } == [["2019-04", "2019-12"], ["2024-01", "2024-01"]]
    )
    #expect(
      wide.days.map { [$0.first, $0.last] } == [
        ["2019-03-05", "2019-03-31"], ["2024-02-01", "2024-02-10"],
      ]
    )
    #expect(
      wide.bucketPeriods.map { [$0.first, $0.last] } == [
        ["Y2020", "Y2023"], ["M2019-04", "M2019-12"], ["M2024-01", "M2024-01"],
      ]
    )
    let inMonth = SalesPeriods(from: "2024-02-03", to: "2024-02-29")
    #expect(inMonth.years == nil && inMonth.months.isEmpty)
    #expect(inMonth.days.map { [$0.first, $0.last] } == [["2024-02-03", "2024-02-29"]])
    let acrossYears = SalesPeriods(from: "2023-11-01", to: "2024-01-31")
    #expect(acrossYears.years == nil && acrossYears.days.isEmpty)
    #expect(acrossYears.months.map { [$0.first, $0.last] } == [["2023-11", "2024-01"]])
    let open = SalesPeriods(from: nil, to: nil)
    #expect(
      open.years?.first == "1900" && open.years?.last == "9999" && open.months.isEmpty
        && open.days.isEmpty
    )
    let day = SalesPeriods(from: "2024-03-31", to: "2024-03-31")
    #expect(day.days.map { [$0.first, $0.last] } == [["2024-03-31", "2024-03-31"]])
    #expect(
      SalesPeriods(from: "2024-04-01", to: "2024-03-31")
        == SalesPeriods(from: "2030-01-01", to: "2029-01-01")
    )
  }

  @Test(
    "medians over any range, with and without a department, match a reference through moves and deletes"
  )
  func medians() async throws {
    // The page's time budget out of reach: a slow machine (a sanitizer build) otherwise ends
    // the last page below early, which this test does not check.
    try await withTemporaryStore(
      employees: 40,
      configure: { $0.medianPageBudget = .seconds(3600) }
    ) { store async throws in
      var random = SplitMix64(seed: 11)
      let guids = try await Self.guids(store)
      // Amounts of every size, many repeated (one bucket full of one amount), over four years.
      let sales = (0 ..< 1_500).map { index in
        let amount: Int64 =
          switch index % 5 {
          case 0: 10_000
          case 1: Int64(random.next() % 10)
          case 2: Int64(random.next() % 1_000_000)
          default: Int64(random.next() % 60_000)
          }
        let day = CivilDate(
          dayNumber: CivilDate(year: 2020, month: 1, day: 1)!.dayNumber + Int(random.next() % 1_461)
        )
        return SaleRow(
          employeeGUID: guids[Int(random.next() % UInt64(guids.count))],
          amountCents: amount,
          date: day.text
        )
      }
      _ = try await store.importSales(AsyncStreamOf([sales]))
      try await Self.check(store, &random)
      // Moves and deletes change the buckets the medians read.
      for guid in guids.prefix(6) {
        var changes = EmployeeChanges()
        changes.department = AnalyticsTests.departments[Int(random.next() % 4)] + " Moved"
        _ = try await store.updateEmployee(guid: guid, changes: changes)
      }
      for guid in guids.suffix(4) { try await store.deleteEmployee(guid: guid) }
      _ = try await store.deleteSales(before: "2020-07-14", limit: 10_000)
      #expect(try AnalyticsTests.drift(store) == nil)
      try await Self.check(store, &random)
      // More departments than a page of bucket medians holds: the page ends early.
      let first = try await store.aggregateSales(
        .median,
        groupedBy: .department,
        filter: SalesFilter()
      )
      #expect(
        first.groups.count == AmountBuckets.mediansPerPage && first.next == first.groups.last?.key
      )
    }
  }

  @Test("a page of medians takes another only while one more at the mean so far fits its time")
  func pageClock() {
    let start = ContinuousClock.now
    var clock = MedianPageClock(limit: 5, budget: .milliseconds(250), now: start)
    // The first is always taken; then 100 ms each: 100 + 100 fits, 200 + 100 does not.
    let taken = [0, 100, 200].map { clock.takeAnother(now: start + .milliseconds($0)) }
    #expect(taken == [true, true, false] && clock.taken == 2)
    let early = clock.page(
      [AggregateValue(key: "a", value: 1), AggregateValue(key: "b", value: 2)],
      of: ["a", "b", "c"]
    )
    #expect(early.next == "b")
    // Fast medians stop at the limit; the keys past it make the token.
    var fast = MedianPageClock(limit: 2, budget: .milliseconds(250), now: start)
    #expect((0 ..< 3).map { _ in fast.takeAnother(now: start) } == [true, true, false])
    #expect(fast.page([], of: ["a", "b", "c"]).next == "b")
    #expect(fast.page([], of: ["a", "b"]).next == nil)
    #expect(MedianPageClock(limit: 5).page([], of: []).next == nil)
  }

  @Test("department medians paged one at a time when each takes the whole budget, none lost")
  func pagesByTime() async throws {
    let all = try await withTemporaryStore(employees: 40) { store async throws in
      try await Self.departmentMedians(store)
    }
    try await withTemporaryStore(employees: 40, configure: { $0.medianPageBudget = .zero }) {
      store async throws in
      #expect(try await Self.departmentMedians(store) == all)
      let first = try await store.aggregateSales(
        .median,
        groupedBy: .department,
        filter: SalesFilter()
      )
      #expect(first.groups.count == 1 && first.next == first.groups.first?.key)
    }
    #expect(all.count > AmountBuckets.mediansPerPage)
  }

  /// The store's employees' guids, in name order.
  static func guids(_ store: SQLiteStore) async throws -> [String] {
    try await store.employeePage(
      fields: .all,
      filter: EmployeeFilter(),
      order: .name,
      after: nil,
      limit: 100
    ).employees.map(\.guid)
  }

  /// Every department's median, page by page; the same sales in each store (seeded alike).
  static func departmentMedians(_ store: SQLiteStore) async throws -> [AggregateValue] {
    let guids = try await Self.guids(store)
    let start = CivilDate(year: 2021, month: 1, day: 1)!.dayNumber
    let sales = (0 ..< 400).map { index in
      SaleRow(
        employeeGUID: guids[index % guids.count],
        amountCents: Int64(index * 137 % 90_000),
        date: CivilDate(dayNumber: start + index).text
      )
    }
    _ = try await store.importSales(AsyncStreamOf([sales]))
    var groups: [AggregateValue] = []
    var after: String?
    repeat {
      let page = try await store.aggregateSales(
        .median,
        groupedBy: .department,
        filter: SalesFilter(),
        page: AggregatePageRequest(after: after)
      )
      groups += page.groups
      after = page.next
    } while after != nil
    return groups
  }

  /// Medians by nothing and by department over fixed and random ranges against the raw sales.
  static func check(_ store: SQLiteStore, _ random: inout SplitMix64) async throws {
    let raw = try AnalyticsTests.rawSales(store)
    var ranges: [(String?, String?)] = [
      (nil, nil), ("1990-01-01", "2099-12-31"), ("2020-01-01", nil), (nil, "2021-06-30"),
      ("2021-02-14", "2021-02-14"),
      ("2020-12-15", "2022-01-15"), ("2019-12-31", "2023-12-30"), ("2030-01-01", "2031-01-01"),
    ]
    for _ in 0 ..< 20 {
      let a = CivilDate(
        dayNumber: CivilDate(year: 2019, month: 6, day: 1)!.dayNumber + Int(random.next() % 2_000)
      )
      let b = CivilDate(dayNumber: a.dayNumber + Int(random.next() % 1_000))
      ranges.append((a.text, b.text))
    }
    let departments =
      [nil] + Array(Set(raw.map(\.department))).sorted().prefix(2).map(Optional.some)
    for (from, to) in ranges {
      for department in departments {
        let filter = SalesFilter(department: department, fromDate: from, toDate: to)
        let matching = raw.filter {
          (department == nil || $0.department == department) && $0.date >= (from ?? "")
            && $0.date <= (to ?? "9999")
        }
        let none = try await store.aggregateSales(.median, groupedBy: .none, filter: filter)
        #expect(
          none.groups.map(\.value) == [
            matching.isEmpty ? 0 : AnalyticsTests.reference(.median, matching.map(\.amount))
          ],
          "\(filter)"
        )
        let byDepartment = try await AnalyticsTests.everyPage { page in
          try await store.aggregateSales(
            .median,
            groupedBy: .department,
            filter: filter,
            page: page
          )
        }
        let expected = Dictionary(grouping: matching, by: \.department).mapValues {
          AnalyticsTests.reference(.median, $0.map(\.amount))
        }
        #expect(byDepartment.map(\.key) == expected.keys.sorted(), "\(filter)")
        for group in byDepartment {
          #expect(group.value == expected[group.key], "\(filter), \(group.key)")
        }
      }
    }
  }
}
