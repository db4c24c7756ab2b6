import ArgumentParser
import Foundation
import RosterStore
import Synchronization

/// `roster measure-analytics`: the server-side time of each analytics read, measured in
/// process on a database file, the way the Analytics service calls the store.
///
/// It leaves out gRPC on purpose: this is the figure that must not grow with the data, and
/// the transport's fixed cost would only hide it. `scripts/bench-analytics` runs it at 1k and
/// at 1M employees.
struct MeasureAnalytics: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "measure-analytics",
    abstract: "Time the analytics reads in process on a database (median and p90, in µs)."
  )

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Option(help: "Timed calls per read, after as many warm-up calls.")
  var iterations: Int = 500

  @Option(help: "The department for the department reads.")
  var department: String = "Engineering"

  func validate() throws {
    if self.iterations < 1 { throw ValidationError("--iterations must be at least 1") }
  }

  func run() async throws {
    let store = try RosterStore(configuration: StoreConfiguration(path: self.db))
    let guids = try await store.employeePage(
      fields: .all,
      filter: EmployeeFilter(),
      order: .startDate,
      after: nil,
      limit: 200
    ).employees.map(\.guid)
    guard !guids.isEmpty else { throw ValidationError("the database has no employees") }
    let department = self.department
    let next = Mutex(0)
    @Sendable func guid() -> String {
      next.withLock { next in
        next += 1
        return guids[next % guids.count]
      }
    }
    let reads: [(String, @Sendable () async throws -> Void)] = [
      ("DepartmentHeadcounts", { _ = try await store.departmentCounts() }),
      ("DepartmentSummary", { _ = try await store.departmentCounts(department) }),
      ("EmployeeSales", { _ = try await store.employeeSales(guid: guid()) }),
      ("SalesCalendar, everyone", { _ = try await store.salesCalendar(scope: .everyone) }),
      ("SalesCalendar, a department", { _ = try await store.salesCalendar(scope: .department(department)) }),
      ("SalesCalendar, an employee", { _ = try await store.salesCalendar(scope: .employee(guid: guid())) }),
      (
        "SalesCalendar, everyone, 2024-03 days",
        { _ = try await store.salesCalendar(scope: .everyone, year: 2024, month: 3) }
      ),
    ]
    print("| read | median µs | p90 µs |")
    print("| --- | ---: | ---: |")
    for (name, read) in reads {
      for _ in 0..<self.iterations { try await read() }
      var samples: [Double] = []
      samples.reserveCapacity(self.iterations)
      for _ in 0..<self.iterations {
        let started = ContinuousClock.now
        try await read()
        samples.append((ContinuousClock.now - started).seconds * 1e6)
      }
      samples.sort()
      let median = samples[samples.count / 2]
      let p90 = samples[min(samples.count - 1, samples.count * 9 / 10)]
      print("| \(name) | \(String(format: "%.1f", median)) | \(String(format: "%.1f", p90)) |")
    }
  }
}
