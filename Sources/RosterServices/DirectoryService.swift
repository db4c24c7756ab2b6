public import GRPCCore
public import Logging
public import RosterProto
public import RosterStore

/// `roster.v1.Directory`: employees, pages, search and (later) writes and the change feed.
///
/// ```swift
/// let server = GRPCServer(transport: transport, services: [DirectoryService(store: store)])
/// ```
public struct DirectoryService: Sendable {
  private let store: RosterStore
  private let logger: Logger

  /// Creates the service over a shared store.
  public init(store: RosterStore, logger: Logger = Logger(label: "roster.directory")) {
    self.store = store
    self.logger = logger
  }
}

extension DirectoryService: Roster_V1_Directory.SimpleServiceProtocol {
  /// One page of employees.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a negative `page_size`, a bad or mismatched
  /// `page_token`, an unknown `order_by` or `read_mask` path, or an over-long filter.
  public func listEmployees(
    request: Roster_V1_ListEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_ListEmployeesResponse {
    let listing = try DirectoryRequests.listing(request)
    return try await withStatusMapping("ListEmployees", logger: self.logger) {
      let page = try self.readPage(listing, after: listing.cursor)
      return .with {
        $0.employees = page.employees.map { Roster_V1_Employee($0, mask: listing.mask) }
        $0.nextPageToken = listing.token(after: page.next)
      }
    }
  }

  /// Streams every matching employee, a page per message, as fast as the client reads.
  ///
  /// No read transaction is held between pages, so a slow reader never pins the WAL.
  /// Statuses: as `ListEmployees`, plus `CANCELLED` when the client goes away.
  public func streamEmployees(
    request: Roster_V1_ListEmployeesRequest,
    response: RPCWriter<Roster_V1_EmployeePage>,
    context: ServerContext
  ) async throws {
    let listing = try DirectoryRequests.listing(request)
    try await withStatusMapping("StreamEmployees", logger: self.logger) {
      var cursor = listing.cursor
      repeat {
        try Task.checkCancellation()
        let page = try self.readPage(listing, after: cursor)
        if page.employees.isEmpty { break }
        cursor = page.next
        try await response.write(
          .with {
            $0.employees = page.employees.map { Roster_V1_Employee($0, mask: listing.mask) }
            $0.nextPageToken = listing.token(after: page.next)
          }
        )
      } while cursor != nil
    }
  }

  /// One employee by guid.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a missing or malformed `guid` or a bad `read_mask`;
  /// `NOT_FOUND` for an unknown guid.
  public func getEmployee(
    request: Roster_V1_GetEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_Employee {
    let guid = try DirectoryRequests.guid(request.guid)
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil)
    return try await withStatusMapping("GetEmployee", logger: self.logger) {
      Roster_V1_Employee(try self.store.employee(guid: guid, fields: mask.fields), mask: mask)
    }
  }

  /// Up to 1,000 employees by guid, in request order, all or nothing.
  ///
  /// Statuses: `INVALID_ARGUMENT` for no guids, more than 1,000, a malformed guid or a bad
  /// `read_mask`; `NOT_FOUND` naming the first unknown guid.
  public func batchGetEmployees(
    request: Roster_V1_BatchGetEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_BatchGetEmployeesResponse {
    if request.guids.isEmpty {
      throw RPCError(code: .invalidArgument, message: "guids must hold at least one guid")
    }
    if request.guids.count > DirectoryRequests.maximumBatchGet {
      throw RPCError(
        code: .invalidArgument,
        message: "guids holds \(request.guids.count) guids; the most is "
          + "\(DirectoryRequests.maximumBatchGet)"
      )
    }
    let guids = try request.guids.map { try DirectoryRequests.guid($0, field: "guids") }
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil)
    return try await withStatusMapping("BatchGetEmployees", logger: self.logger) {
      let employees = try self.store.employees(guids: guids, fields: mask.fields)
      return .with { $0.employees = employees.map { Roster_V1_Employee($0, mask: mask) } }
    }
  }

  /// How many employees match the List filters, counted in SQL.
  ///
  /// Statuses: `INVALID_ARGUMENT` for an over-long filter.
  public func countEmployees(
    request: Roster_V1_CountEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_CountEmployeesResponse {
    let filter = try DirectoryRequests.filter(
      department: request.department,
      active: request.hasActive ? request.active : nil,
      nameContains: request.nameContains
    )
    return try await withStatusMapping("CountEmployees", logger: self.logger) {
      let count = try self.store.countEmployees(filter: filter)
      return .with { $0.count = count }
    }
  }

  // MARK: Writes (issue #3)

  /// Statuses: `UNIMPLEMENTED` until the writer lands.
  public func createEmployee(
    request: Roster_V1_CreateEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_Employee {
    throw unimplemented("roster.v1.Directory/CreateEmployee")
  }

  /// Statuses: `UNIMPLEMENTED` until the writer lands.
  public func updateEmployee(
    request: Roster_V1_UpdateEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_Employee {
    throw unimplemented("roster.v1.Directory/UpdateEmployee")
  }

  /// Statuses: `UNIMPLEMENTED` until the writer lands.
  public func deleteEmployee(
    request: Roster_V1_DeleteEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeleteEmployeeResponse {
    throw unimplemented("roster.v1.Directory/DeleteEmployee")
  }

  /// Statuses: `UNIMPLEMENTED` until the writer lands.
  public func upsertEmployees(
    request: RPCAsyncSequence<Roster_V1_UpsertEmployeesRequest, any Error>,
    context: ServerContext
  ) async throws -> Roster_V1_UpsertEmployeesResponse {
    throw unimplemented("roster.v1.Directory/UpsertEmployees")
  }

  /// Statuses: `UNIMPLEMENTED` until the writer lands.
  public func batchUpdateEmployees(
    request: Roster_V1_BatchUpdateEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_BatchUpdateEmployeesResponse {
    throw unimplemented("roster.v1.Directory/BatchUpdateEmployees")
  }

  /// Statuses: `UNIMPLEMENTED` until the writer lands.
  public func deleteEmployees(
    request: Roster_V1_DeleteEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeleteEmployeesResponse {
    throw unimplemented("roster.v1.Directory/DeleteEmployees")
  }

  /// Statuses: `UNIMPLEMENTED` until the change feed lands.
  public func watchChanges(
    request: Roster_V1_WatchChangesRequest,
    response: RPCWriter<Roster_V1_ChangeEvent>,
    context: ServerContext
  ) async throws {
    throw unimplemented("roster.v1.Directory/WatchChanges")
  }

  // MARK: Helpers

  private func readPage(
    _ listing: DirectoryRequests.Listing,
    after cursor: EmployeeCursor?
  ) throws -> EmployeePage {
    try self.store.employeePage(
      fields: listing.mask.fields,
      filter: listing.filter,
      order: listing.order,
      after: cursor,
      limit: listing.pageSize
    )
  }
}
