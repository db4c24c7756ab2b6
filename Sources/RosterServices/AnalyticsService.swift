public import GRPCCore
public import RosterProto

/// `roster.v1.Analytics`: headcounts, sales counts, grouped aggregates and calendar rollups.
///
/// Every method answers `UNIMPLEMENTED` until issue #5 builds it; the contract is
/// published now so clients can be generated against it.
public struct AnalyticsService: Sendable {
  /// Creates the service.
  public init() {}
}

extension AnalyticsService: Roster_V1_Analytics.SimpleServiceProtocol {
  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func departmentHeadcounts(
    request: Roster_V1_DepartmentHeadcountsRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DepartmentHeadcountsResponse {
    throw unimplemented("roster.v1.Analytics/DepartmentHeadcounts")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func departmentSummary(
    request: Roster_V1_DepartmentSummaryRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DepartmentSummaryResponse {
    throw unimplemented("roster.v1.Analytics/DepartmentSummary")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func employeeSales(
    request: Roster_V1_EmployeeSalesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_EmployeeSalesResponse {
    throw unimplemented("roster.v1.Analytics/EmployeeSales")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func aggregateSales(
    request: Roster_V1_AggregateSalesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_AggregateResponse {
    throw unimplemented("roster.v1.Analytics/AggregateSales")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func aggregateEmployees(
    request: Roster_V1_AggregateEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_AggregateResponse {
    throw unimplemented("roster.v1.Analytics/AggregateEmployees")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func salesCalendar(
    request: Roster_V1_SalesCalendarRequest,
    context: ServerContext
  ) async throws -> Roster_V1_SalesCalendarResponse {
    throw unimplemented("roster.v1.Analytics/SalesCalendar")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func importSales(
    request: RPCAsyncSequence<Roster_V1_ImportSalesRequest, any Error>,
    context: ServerContext
  ) async throws -> Roster_V1_ImportSalesResponse {
    throw unimplemented("roster.v1.Analytics/ImportSales")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #5.
  public func deleteSales(
    request: Roster_V1_DeleteSalesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeleteSalesResponse {
    throw unimplemented("roster.v1.Analytics/DeleteSales")
  }
}
