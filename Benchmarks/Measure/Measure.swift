import ArgumentParser
import Foundation
import RosterDomain
import RosterPostgres
import RosterSQLite
import RosterStore
import Synchronization

/// `roster-measure analytics`: the server-side time of each analytics read, measured in
/// process on a database file, the way the Analytics service calls the store.
///
/// It leaves out gRPC on purpose: this is the figure that must not grow with the data, and
/// the transport's fixed cost would only hide it. `scripts/bench-analytics` runs it at 1k and
/// at 1M employees.
struct MeasureAnalytics: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "analytics",
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
    let store = try SQLiteStore(configuration: StoreConfiguration(path: self.db))
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
      (
        "SalesCalendar, a department",
        { _ = try await store.salesCalendar(scope: .department(department)) }
      ),
      (
        "SalesCalendar, an employee",
        { _ = try await store.salesCalendar(scope: .employee(guid: guid())) }
      ),
      (
        "SalesCalendar, everyone, 2024-03 days",
        { _ = try await store.salesCalendar(scope: .everyone, year: 2024, month: 3) }
      ),
    ]
    print("| read | median µs | p90 µs |")
    print("| --- | ---: | ---: |")
    for (name, read) in reads {
      for _ in 0 ..< self.iterations { try await read() }
      var samples: [Double] = []
      samples.reserveCapacity(self.iterations)
      for _ in 0 ..< self.iterations {
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

/// `roster-measure aggregates`: the time of every `AggregateSales` shape (each function, each
/// grouping, over ranges a date picker sends: a month, a year, all dates, a span of years that
/// starts and ends mid-month, part of a year, and a range wider than the data; with and
/// without a department filter), its first page, in process on a SQLite file or a PostgreSQL
/// schema.
struct MeasureAggregates: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "aggregates",
    abstract: "Time every AggregateSales shape's first page in process (p50 and p99, in ms)."
  )

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Option(help: "Measure a PostgreSQL store instead: postgres://user@host:port/database.")
  var postgres: String?

  @Option(help: "The PostgreSQL schema of the store.")
  var postgresSchema: String = "roster"

  @Option(help: "Timed calls per shape, after one warm-up call.")
  var iterations: Int = 5

  @Option(help: "The department of the filtered shapes.")
  var department: String = "Engineering"

  @Option(help: "The month and the year of the ranged shapes, as YYYY-MM.")
  var month: String = "2024-03"

  @Option(help: "Seconds one call may run before it is stopped and reported as over.")
  var budgetSeconds: Int = 30

  @Option(
    name: .customLong("function"),
    help:
      "Only this function (count, sum, average, minimum, maximum, median, standardDeviation); repeatable."
  )
  var functions: [String] = []

  func validate() throws {
    if self.iterations < 1 { throw ValidationError("--iterations must be at least 1") }
    if CivilDate(self.month + "-01") == nil { throw ValidationError("--month must be YYYY-MM") }
  }

  func run() async throws {
    if let url = self.postgres {
      var configuration = PostgresConfiguration(url: try PostgresURL(url))
      configuration.schema = self.postgresSchema
      configuration.statementTimeout = .seconds(self.budgetSeconds)
      try await PostgresStore.withOffline(configuration, label: "roster.measure") {
        try await self.measure($0)
      }
      return
    }
    var configuration = StoreConfiguration(path: self.db)
    configuration.heavyLane.budget = .seconds(self.budgetSeconds)
    try await self.measure(try SQLiteStore(configuration: configuration))
  }

  /// The ranges of the shapes: label, from, to.
  var ranges: [(String, String?, String?)] {
    let year = Int(self.month.prefix(4))!
    let monthEnd = CivilDate(self.month + "-01")!.lastDayOfMonth.text
    return [
      ("month \(self.month)", self.month + "-01", monthEnd),
      ("year \(year)", "\(year)-01-01", "\(year)-12-31"),
      ("all dates", nil, nil),
      ("\(year - 9)-03-17 to \(year + 1)-09-12", "\(year - 9)-03-17", "\(year + 1)-09-12"),
      ("\(year)-02-10 to \(year)-11-20", "\(year)-02-10", "\(year)-11-20"),
      ("1900-01-01 to 2099-12-31", "1900-01-01", "2099-12-31"),
    ]
  }

  func measure(_ store: some AnalyticsStore) async throws {
    print("| function | group_by | range | department | groups | p50 ms | p99 ms |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for function in AggregateFunction.allCases
    where self.functions.isEmpty || self.functions.contains(function.rawValue) {
      for grouping in AggregateGrouping.allCases where grouping != .active {
        for (range, from, to) in self.ranges {
          for department in [nil, self.department] {
            let filter = SalesFilter(department: department, fromDate: from, toDate: to)
            var samples: [Double] = []
            var groups = 0
            var over = false
            for index in 0 ... self.iterations {
              let started = ContinuousClock.now
              do {
                groups = try await store.aggregateSales(
                  function,
                  groupedBy: grouping,
                  filter: filter,
                  page: AggregatePageRequest()
                ).groups.count
              } catch let error as StoreError where error.code == .deadlineExceeded {
                over = true
                break
              }
              if index > 0 { samples.append((ContinuousClock.now - started).seconds * 1000) }
            }
            let label = "| \(function) | \(grouping) | \(range) | \(department ?? "any") |"
            if over {
              print("\(label) | | over \(self.budgetSeconds) s | over \(self.budgetSeconds) s |")
              continue
            }
            samples.sort()
            let p50 = samples[samples.count / 2]
            let p99 = samples[min(samples.count - 1, samples.count * 99 / 100)]
            print(
              "\(label) \(groups) | \(String(format: "%.1f", p50)) | \(String(format: "%.1f", p99)) |"
            )
          }
        }
      }
    }
  }
}
