import Foundation
import TestSupport
import Testing

@testable import RosterDomain
@testable import RosterSQLite
@testable import RosterSeed

/// Demo sales, the sales file, and the calendar arithmetic under them.
@Suite("Demo sales", .timeLimit(.minutes(10)))
struct DemoSalesTests {
  @Test("day numbers agree with Foundation's Gregorian calendar from 1900 to 2100")
  func civilDates() throws {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let epoch = Date(timeIntervalSince1970: 0)
    for dayNumber in stride(from: -25_567, through: 47_482, by: 1) {
      let date = CivilDate(dayNumber: dayNumber)
      #expect(date.dayNumber == dayNumber)
      if dayNumber % 97 == 0 {
        let parts = calendar.dateComponents(
          [.year, .month, .day],
          from: epoch.addingTimeInterval(Double(dayNumber) * 86_400)
        )
        #expect(date == CivilDate(year: parts.year!, month: parts.month!, day: parts.day!))
        #expect(CivilDate(date.text) == date)
      }
    }
    #expect(CivilDate("2024-02-29")?.lastDayOfMonth.text == "2024-02-29")
    #expect(CivilDate("2023-02-29") == nil)
    #expect(CivilDate("1900-02-29") == nil)
    #expect(CivilDate("2000-02-29") != nil)
    #expect(CivilDate("2024-1-01") == nil)
  }

  @Test("demo sales are deterministic, dated from each start date to the fixed last date")
  func demoSales() throws {
    let employees = DemoData(count: 300)
    let starts = Dictionary(
      uniqueKeysWithValues: employees.map { ($0.employee.guid, $0.employee.startDate) }
    )
    let sales = Array(DemoSales(employees: employees, perEmployee: 20))
    #expect(sales == Array(DemoSales(employees: employees, perEmployee: 20)))
    #expect(sales != Array(DemoSales(employees: employees, perEmployee: 20, seed: 7)))
    // Half to one and a half times the mean each, so the total is near 300 × 20.
    #expect((4_500 ... 7_500).contains(sales.count))
    let perEmployee = Dictionary(grouping: sales, by: \.employeeGUID).mapValues(\.count)
    #expect(perEmployee.values.allSatisfy { (10 ... 30).contains($0) })
    #expect(perEmployee.count == 300)
    for sale in sales {
      let start = try #require(starts[sale.employeeGUID])
      #expect(sale.date >= start && sale.date <= DemoSales.lastDate.text, "\(sale)")
      #expect(sale.amountCents >= 2_000 && sale.amountCents <= 500_000)
    }
    #expect(Array(DemoSales(employees: employees, perEmployee: 0)).isEmpty)
  }

  @Test("a sales file round-trips, and a malformed line is named")
  func salesFile() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/sales.csv"
    let sales = Array(DemoSales(employees: DemoData(count: 50), perEmployee: 7))
    #expect(try SalesFile.write(sales, to: path) == sales.count)
    var read: [SaleRow] = []
    for try await batch in try SalesFile.batches(path, size: 64) {
      #expect(batch.count <= 64)
      read += batch
    }
    #expect(read == sales)

    try "employee_guid,amount,date\nabc,12.5,2024-01-01\nabc,twelve,2024-01-02\n"
      .write(toFile: path, atomically: true, encoding: .utf8)
    await #expect(throws: StoreError.self) {
      for try await _ in try SalesFile.batches(path) {}
    }
    do {
      for try await _ in try SalesFile.batches(path) {}
    } catch let error as StoreError {
      #expect(error.message.contains("line 3"))
    }
  }

  @Test("sales file amounts are read into cents exactly, and anything but two decimals is refused")
  func salesFileAmounts() {
    let good: [(String, Int64)] = [
      ("0", 0), ("12", 1_200), ("12.5", 1_250), ("12.50", 1_250), ("0.07", 7), ("-3.05", -305),
      ("1234567.89", 123_456_789), ("999999999999999.99", 99_999_999_999_999_999),
      // 0.29 × 100 is 28.999999999999996 in floating point; the text is read as integers.
      ("0.29", 29), ("4.35", 435),
    ]
    for (text, cents) in good {
      #expect(SalesFile.cents(Substring(text)) == cents, "\(text)")
      #expect(
        SalesFile.cents(Substring(SalesFile.amountText(cents: cents))) == cents,
        "\(text) round trip"
      )
    }
    #expect(SalesFile.amountText(cents: 1_250) == "12.50")
    #expect(SalesFile.amountText(cents: -305) == "-3.05")
    #expect(SalesFile.amountText(cents: 7) == "0.07")
    for bad in [
      "", "-", ".5", "12.", "12.345", "1e3", "12,5", "twelve", "1 2", "+1", "1234567890123456",
    ] {
      #expect(SalesFile.cents(Substring(bad)) == nil, "\(bad)")
    }
  }

  @Test("imported demo sales land in full, and the counters match them")
  func importDemoSales() async throws {
    try await withTemporaryStore(employees: 200) { store async throws in
      let employees = DemoData(count: 200)
      let sales = DemoSales(employees: employees, perEmployee: 10)
      let result = try await store.importSales(sales.batches(size: 333))
      #expect(result.rejected.isEmpty)
      #expect(result.inserted == Array(sales).count)
      #expect(try AnalyticsTests.drift(store) == nil)
      let first = try #require(Array(employees).first)
      let expected = Array(sales).filter { $0.employeeGUID == first.employee.guid }
      let counted = try await store.employeeSales(guid: first.employee.guid)
      #expect(counted.count == Int64(expected.count))
      #expect(counted.totalCents == expected.map(\.amountCents).reduce(0, +))
    }
  }
}
