public import RosterDomain

/// Headcounts, sales, aggregates and calendars, and the sales writes. Money is integer cents.
public protocol AnalyticsStore: Sendable {
  /// Every department with its counters, sorted by name.
  func departmentCounts() async throws -> [DepartmentCounts]

  /// One department's counters. Throws `notFound` for a department with no employees.
  func departmentCounts(_ department: String) async throws -> DepartmentCounts

  /// An employee's number of sales and their total in cents. Throws `notFound` for an unknown
  /// guid.
  func employeeSales(guid: String) async throws -> (count: Int64, totalCents: Int64)

  /// One page of `function` over sale amounts (cents), grouped, filtered; groups by key.
  func aggregateSales(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: SalesFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage

  /// One page of `function` over vacation days (or a count of employees), grouped, filtered.
  func aggregateEmployees(
    _ function: AggregateFunction,
    groupedBy grouping: AggregateGrouping,
    filter: EmployeeFilter,
    page: AggregatePageRequest
  ) async throws -> AggregatePage

  /// Yearly and monthly totals for `scope`, and one month's days when `year` and `month` are
  /// given.
  func salesCalendar(scope: SalesScope, year: Int?, month: Int?) async throws -> SalesCalendar

  /// Up to `limit` stored sales strictly after the position `after` (nil for the first), in
  /// the order they were stored, for copying them elsewhere: a read whose cost is the page.
  func salesPage(after: Int64?, limit: Int) async throws -> SalesPage

  /// Inserts sales as they stream in, in chunks each committed on its own (of `chunkRows`
  /// sales, or the backend's default for nil); bad rows are counted, the first thousand
  /// listed with their index, and skipped. The summary's `updated` is 0.
  func importSales<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext,
    chunkRows: Int?
  ) async throws -> ImportSummary where Rows.Element == [SaleRow]

  /// Deletes up to `limit` sales dated before `date`, in chunks; returns how many went and
  /// whether more remain.
  func deleteSales(
    before date: String,
    limit: Int,
    context: WriteContext
  ) async throws -> (deleted: Int, more: Bool)
}
