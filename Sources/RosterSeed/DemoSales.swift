internal import Foundation
public import RosterDomain

/// Deterministic demo sales for the employees of a `DemoData`: about `perEmployee` each,
/// spread uniformly from the employee's start date to `lastDate`, with amounts from $20 to
/// $5,000 on a log scale (many small sales, few large ones).
///
/// The same employees, `perEmployee` and `seed` always give the same sales, in employee order.
public struct DemoSales: Sequence, Sendable {
  /// The employees the sales belong to.
  public var employees: DemoData
  /// The mean number of sales per employee; each gets from half to one and a half times it.
  public var perEmployee: Int
  /// The generator's seed.
  public var seed: UInt64

  /// The last date a demo sale can have. Fixed, so the data does not depend on today.
  public static let lastDate = CivilDate(year: 2025, month: 12, day: 31)!

  /// Creates the sales of `employees`.
  public init(employees: DemoData, perEmployee: Int, seed: UInt64 = 0x5A1E) {
    self.employees = employees
    self.perEmployee = perEmployee
    self.seed = seed
  }

  /// The sales in batches of `size`, as the async sequence `SQLiteStore.importSales` takes.
  public func batches(size: Int = 5_000) -> AsyncBatches<DemoSales> {
    AsyncBatches(self, size: size)
  }

  public func makeIterator() -> Iterator {
    Iterator(
      employees: self.perEmployee > 0
        ? self.employees.makeIterator() : DemoData(count: 0).makeIterator(),
      random: SplitMix64(seed: self.seed ^ self.employees.seed),
      perEmployee: self.perEmployee
    )
  }

  /// Produces the sales one at a time, in constant memory.
  public struct Iterator: IteratorProtocol {
    var employees: DemoData.Iterator
    var random: SplitMix64
    let perEmployee: Int
    var guid = ""
    var firstDay = 0
    var remaining = 0

    public mutating func next() -> SaleRow? {
      while self.remaining == 0 {
        guard let record = self.employees.next() else { return nil }
        self.guid = record.employee.guid
        self.firstDay =
          CivilDate(record.employee.startDate)?.dayNumber
          ?? DemoSales.lastDate.dayNumber
        self.remaining =
          self.perEmployee / 2 + Int(self.random.next() % UInt64(self.perEmployee + 1))
      }
      self.remaining -= 1
      let span = UInt64(DemoSales.lastDate.dayNumber - self.firstDay + 1)
      let date = CivilDate(dayNumber: self.firstDay + Int(self.random.next() % span))
      let unit = Double(self.random.next() >> 11) / Double(1 << 53)
      let cents = Int64((2_000 * exp(unit * log(250.0))).rounded())
      return SaleRow(employeeGUID: self.guid, amountCents: cents, date: date.text)
    }
  }
}
