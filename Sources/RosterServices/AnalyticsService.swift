public import GRPCCore
public import Logging
internal import RosterDomain
public import RosterProto
public import RosterStore

/// `roster.v1.Analytics`: headcounts, sales counts, grouped aggregates and calendar rollups.
///
/// The common numbers come from counters and rollups that every write keeps in step, so
/// they cost the same at a thousand employees as at a million. Raw rows are read only by
/// what needs them: MEDIAN, STDDEV and filtered aggregates, and a month's days the first
/// time they are asked for.
public struct AnalyticsService: Sendable {
  private let store: any AnalyticsStore
  private let logger: Logger

  /// Creates the service over a shared store.
  public init(store: any AnalyticsStore, logger: Logger = Logger(label: "roster.analytics")) {
    self.store = store
    self.logger = logger
  }
}

extension AnalyticsService: Roster_V1_Analytics.SimpleServiceProtocol {
  /// Every department with its headcount and active count, sorted by department.
  public func departmentHeadcounts(
    request: Roster_V1_DepartmentHeadcountsRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DepartmentHeadcountsResponse {
    try await withStatusMapping("DepartmentHeadcounts", logger: self.logger) {
      let counts = try await self.store.departmentCounts()
      return .with {
        $0.departments = counts.map { counts in
          .with {
            $0.department = counts.department
            $0.headcount = counts.headcount
            $0.activeCount = counts.active
          }
        }
      }
    }
  }

  /// One department's totals. Statuses: `INVALID_ARGUMENT` for no department, `NOT_FOUND`
  /// for a department with no employees.
  public func departmentSummary(
    request: Roster_V1_DepartmentSummaryRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DepartmentSummaryResponse {
    if request.department.isEmpty {
      throw RPCError(code: .invalidArgument, message: "department is required")
    }
    return try await withStatusMapping("DepartmentSummary", logger: self.logger) {
      let counts = try await self.store.departmentCounts(request.department)
      // Vacation days are personal: a department of one would tell one person's.
      let personal = !Caller.vacationDaysHidden
      return .with {
        $0.total = counts.headcount
        $0.active = counts.active
        if personal {
          $0.vacationDaysTotal = counts.vacationDaysTotal
          $0.vacationDaysAvg = counts.vacationDaysAverage
        }
      }
    }
  }

  /// An employee's sales count and total. Statuses: `INVALID_ARGUMENT` for a bad guid,
  /// `NOT_FOUND` for an unknown one.
  public func employeeSales(
    request: Roster_V1_EmployeeSalesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_EmployeeSalesResponse {
    let guid = try DirectoryRequests.guid(request.guid)
    return try await withStatusMapping("EmployeeSales", logger: self.logger) {
      let sales = try await self.store.employeeSales(guid: guid)
      return .with {
        $0.count = sales.count
        $0.totalAmountCents = sales.totalCents
      }
    }
  }

  /// One page of an aggregate over sale amounts. Statuses: `INVALID_ARGUMENT` for an unset
  /// or unknown `function` or `group_by`, a bad guid, a date that is not real, `from_date`
  /// after `to_date`, a negative `page_size` or a bad or mismatched `page_token`;
  /// `RESOURCE_EXHAUSTED` when too many heavy calls wait; `DEADLINE_EXCEEDED` when the call's
  /// deadline or the server's query budget passes; `CANCELLED`.
  public func aggregateSales(
    request: Roster_V1_AggregateSalesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_AggregateResponse {
    let function = try AnalyticsRequests.function(request.function)
    let grouping = try AnalyticsRequests.grouping(request.groupBy)
    if grouping == .active {
      throw RPCError(
        code: .invalidArgument,
        message: "group_by ACTIVE applies to employees, not sales"
      )
    }
    try AnalyticsRequests.checkDates(from: request.fromDate, to: request.toDate)
    let guid =
      request.employeeGuid.isEmpty
      ? nil : try DirectoryRequests.guid(request.employeeGuid, field: "employee_guid")
    let filter = SalesFilter(
      department: request.department,
      employeeGUID: guid,
      fromDate: request.fromDate,
      toDate: request.toDate
    )
    let fingerprint = PageToken.fingerprint(
      parts: [
        "sales", "\(function)", "\(grouping)", filter.department ?? "", filter.employeeGUID ?? "",
        filter.fromDate ?? "", filter.toDate ?? "",
      ]
    )
    let page = try AnalyticsRequests.page(
      request.pageSize,
      token: request.pageToken,
      fingerprint: fingerprint
    )
    return try await withStatusMapping("AggregateSales", logger: self.logger) {
      AnalyticsRequests.response(
        try await self.store.aggregateSales(
          function,
          groupedBy: grouping,
          filter: filter,
          page: page
        ),
        fingerprint: fingerprint
      )
    }
  }

  /// One page of an aggregate over vacation days, or a count of employees. Statuses:
  /// `INVALID_ARGUMENT` for an unset or unknown `function`, a `group_by` other than NONE,
  /// DEPARTMENT or ACTIVE, a negative `page_size` or a bad or mismatched `page_token`; and
  /// as `AggregateSales` for busy, deadline and cancellation.
  public func aggregateEmployees(
    request: Roster_V1_AggregateEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_AggregateResponse {
    let function = try AnalyticsRequests.function(request.function)
    // Every function but COUNT aggregates vacation days: a filter can narrow it to one person.
    if function != .count, Caller.vacationDaysHidden {
      throw RPCError(
        code: .permissionDenied,
        message: "function: \(function.rawValue.uppercased()) aggregates vacation_days, a personal "
          + "field, which needs the hr or admin role; COUNT needs none"
      )
    }
    let grouping = try AnalyticsRequests.grouping(request.groupBy)
    if ![.none, .department, .active].contains(grouping) {
      throw RPCError(
        code: .invalidArgument,
        message:
          "group_by \(grouping.rawValue.uppercased()) applies to sales; employees group by NONE, DEPARTMENT or ACTIVE"
      )
    }
    let filter = try DirectoryRequests.filter(
      department: request.department,
      active: request.hasActive ? request.active : nil,
      nameContains: request.nameContains
    )
    let active = filter.active.map { $0 ? "1" : "0" } ?? "-"
    let fingerprint = PageToken.fingerprint(
      parts: [
        "employees", "\(function)", "\(grouping)", filter.department ?? "", active,
        filter.nameContains.map(TextFolding.fold) ?? "",
      ]
    )
    let page = try AnalyticsRequests.page(
      request.pageSize,
      token: request.pageToken,
      fingerprint: fingerprint
    )
    return try await withStatusMapping("AggregateEmployees", logger: self.logger) {
      AnalyticsRequests.response(
        try await self.store.aggregateEmployees(
          function,
          groupedBy: grouping,
          filter: filter,
          page: page
        ),
        fingerprint: fingerprint
      )
    }
  }

  /// Years with their months' totals; with `year` and `month`, that month's days too.
  /// Statuses: `INVALID_ARGUMENT` for a month without a year, a month outside 1 to 12, a bad
  /// guid, or both a guid and a department; `NOT_FOUND` for an unknown employee.
  public func salesCalendar(
    request: Roster_V1_SalesCalendarRequest,
    context: ServerContext
  ) async throws -> Roster_V1_SalesCalendarResponse {
    let scope: SalesScope
    if !request.employeeGuid.isEmpty {
      if !request.department.isEmpty {
        throw RPCError(
          code: .invalidArgument,
          message: "give employee_guid or department, not both"
        )
      }
      scope = .employee(
        guid: try DirectoryRequests.guid(request.employeeGuid, field: "employee_guid")
      )
    } else if !request.department.isEmpty {
      scope = .department(request.department)
    } else {
      scope = .everyone
    }
    return try await withStatusMapping("SalesCalendar", logger: self.logger) {
      let calendar = try await self.store.salesCalendar(
        scope: scope,
        year: request.year == 0 ? nil : Int(request.year),
        month: request.month == 0 ? nil : Int(request.month)
      )
      return .with {
        $0.years = calendar.years.map { year in
          .with {
            $0.year = Int32(year.year.number)
            $0.count = year.year.count
            $0.amountCents = year.year.amountCents
            $0.months = year.months.map { month in
              .with {
                $0.month = Int32(month.number)
                $0.count = month.count
                $0.amountCents = month.amountCents
              }
            }
          }
        }
        $0.days = calendar.days.map { day in
          .with {
            $0.day = Int32(day.number)
            $0.count = day.count
            $0.amountCents = day.amountCents
          }
        }
      }
    }
  }

  /// Bulk sales through the coalescing writer; bad rows are reported by stream index.
  public func importSales(
    request: RPCAsyncSequence<Roster_V1_ImportSalesRequest, any Error>,
    context: ServerContext
  ) async throws -> Roster_V1_ImportSalesResponse {
    try await withStatusMapping("ImportSales", logger: self.logger) {
      let rows = request.map { message in
        message.sales.map {
          SaleRow(employeeGUID: $0.employeeGuid, amountCents: $0.amountCents, date: $0.date)
        }
      }
      let result = try await self.store.importSales(
        rows,
        context: RequestAuthor.writeContext,
        chunkRows: nil
      )
      return .with {
        $0.inserted = Int64(result.inserted)
        $0.rejected = result.rejected.map(Roster_V1_Rejection.init)
        $0.rejectedCount = Int64(result.rejectedCount)
      }
    }
  }

  /// Deletes sales dated before `before_date`, at most `limit` (default 1,000, at most
  /// 100,000). Statuses: `INVALID_ARGUMENT` for a missing or unreal date or a bad limit.
  public func deleteSales(
    request: Roster_V1_DeleteSalesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeleteSalesResponse {
    guard !request.beforeDate.isEmpty else {
      throw RPCError(code: .invalidArgument, message: "before_date is required")
    }
    guard EmployeeValidation.isValidDate(request.beforeDate) else {
      throw RPCError(
        code: .invalidArgument,
        message: "before_date \(ClientText.quoted(request.beforeDate)) is not a YYYY-MM-DD date"
      )
    }
    let limit = try DirectoryRequests.deleteLimit(request.limit)
    return try await withStatusMapping("DeleteSales", logger: self.logger) {
      let result = try await self.store.deleteSales(
        before: request.beforeDate,
        limit: limit,
        context: RequestAuthor.writeContext
      )
      return .with {
        $0.deleted = Int64(result.deleted)
        $0.more = result.more
      }
    }
  }
}

/// Proto enums to store values, refusing unset and unknown ones.
enum AnalyticsRequests {
  static func function(_ value: Roster_V1_AggregateFunction) throws -> AggregateFunction {
    switch value {
    case .count: .count
    case .sum: .sum
    case .avg: .average
    case .min: .minimum
    case .max: .maximum
    case .median: .median
    case .stddev: .standardDeviation
    case .unspecified:
      throw RPCError(code: .invalidArgument, message: "function is required")
    case .UNRECOGNIZED(let number):
      throw RPCError(code: .invalidArgument, message: "function \(number) is not a known function")
    }
  }

  static func grouping(_ value: Roster_V1_GroupBy) throws -> AggregateGrouping {
    switch value {
    case .unspecified: .none
    case .department: .department
    case .employee: .employee
    case .year: .year
    case .month: .month
    case .day: .day
    case .active: .active
    case .UNRECOGNIZED(let number):
      throw RPCError(code: .invalidArgument, message: "group_by \(number) is not a known grouping")
    }
  }

  /// Refuses a `from_date` or `to_date` that is not a real date, and a range that ends
  /// before it starts.
  static func checkDates(from: String, to: String) throws {
    for (field, date) in [("from_date", from), ("to_date", to)] where !date.isEmpty {
      if !EmployeeValidation.isValidDate(date) {
        throw RPCError(
          code: .invalidArgument,
          message: "\(field) \(ClientText.quoted(date)) is not a YYYY-MM-DD date"
        )
      }
    }
    if !from.isEmpty, !to.isEmpty, from > to {
      throw RPCError(code: .invalidArgument, message: "from_date \(from) is after to_date \(to)")
    }
  }

  /// The page an aggregate request asks for. A token carries the last key of the page before,
  /// bound to the request's other fields by `fingerprint`.
  static func page(_ size: Int32, token: String, fingerprint: UInt64) throws -> AggregatePageRequest
  {
    if size < 0 {
      throw RPCError(code: .invalidArgument, message: "page_size must not be negative")
    }
    let limit = size == 0 ? AggregatePageRequest.defaultLimit : Int(size)
    guard !token.isEmpty else { return AggregatePageRequest(limit: limit) }
    guard let decoded = PageToken(decoding: token), decoded.cursor.keys.count == 1 else {
      throw RPCError(code: .invalidArgument, message: "page_token is not a valid token")
    }
    guard decoded.fingerprint == fingerprint else {
      throw RPCError(
        code: .invalidArgument,
        message: "page_token was issued for another function, group_by or filters"
      )
    }
    return AggregatePageRequest(after: decoded.cursor.keys[0], limit: limit)
  }

  static func response(_ page: AggregatePage, fingerprint: UInt64) -> Roster_V1_AggregateResponse {
    .with {
      $0.groups = page.groups.map { group in
        .with {
          $0.key = group.key
          $0.value = group.value
        }
      }
      if let next = page.next {
        $0.nextPageToken = PageToken(
          fingerprint: fingerprint,
          cursor: EmployeeCursor(keys: [next], id: 0)
        )
        .encoded()
      }
    }
  }
}
