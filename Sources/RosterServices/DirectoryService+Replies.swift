public import GRPCCore
internal import RosterDomain
public import RosterProto
public import RosterStore

// The replies the fast path writes straight from what the store read, and the point call that
// answers `GetEmployee` without a task.
extension DirectoryService {
  /// `getEmployee`, with the employee as the store read it: the fast path writes its binary
  /// form straight from it (`EmployeeReply.binary()`), the other paths take `message`.
  public func getEmployeeReply(
    request: Roster_V1_GetEmployeeRequest,
    context: ServerContext
  ) async throws -> EmployeeReply {
    let guid = try DirectoryRequests.guid(request.guid)
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil, ownRecord: true)
    return try await withStatusMapping("GetEmployee", logger: self.logger) {
      let employee = try await self.store.employee(guid: guid, fields: mask.readFields)
      try mask.permit([employee])
      return EmployeeReply(employee: employee, mask: mask)
    }
  }

  /// The store, when it runs point calls as jobs of its own (`PointCalls`): the fast path then
  /// answers `GetEmployee` without a task, through `getEmployeeReplyNow` in such a job.
  public var pointCalls: (any PointCalls)? { self.store as? any PointCalls }

  /// The store, when it can refuse a call before it starts (`StoreAdmission`): the fast path
  /// then refuses the calls it would, on the thread that read them.
  public var admission: (any StoreAdmission)? { self.store as? any StoreAdmission }

  /// `getEmployeeReply`, read with `PointCalls.employeeNow`: only inside a call that
  /// `pointCalls` runs.
  public func getEmployeeReplyNow(
    request: Roster_V1_GetEmployeeRequest,
    context: ServerContext,
    store: any PointCalls
  ) throws -> EmployeeReply {
    let guid = try DirectoryRequests.guid(request.guid)
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil, ownRecord: true)
    return try withStatusMappingNow("GetEmployee", logger: self.logger) {
      let employee = try store.employeeNow(guid: guid, fields: mask.readFields)
      try mask.permit([employee])
      return EmployeeReply(employee: employee, mask: mask)
    }
  }

  /// `listEmployees`, with the page as the store read it: the fast path writes its binary or
  /// JSON form straight from it (`EmployeePageReply.binary()`, `json()`), the other paths take
  /// `message`. `written` asks the store to write the rows in that form as it reads them (for
  /// a reply that goes out in it), rather than to make employees.
  public func listEmployeesPage(
    request: Roster_V1_ListEmployeesRequest,
    context: ServerContext,
    written: WrittenFormat? = nil
  ) async throws -> EmployeePageReply<Roster_V1_ListEmployeesResponse> {
    let listing = try DirectoryRequests.listing(request)
    return try await withStatusMapping("ListEmployees", logger: self.logger) {
      try await self.pageReplies(listing, after: listing.cursor, count: 1, written: written)
        .replies[0]
    }
  }
}
