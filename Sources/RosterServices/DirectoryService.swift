internal import CoreMetrics
public import GRPCCore
public import Logging
internal import RosterDomain
public import RosterProto
public import RosterStore

/// `roster.v1.Directory`: employees, pages, search, writes and the change feed.
///
/// ```swift
/// let server = GRPCServer(transport: transport, services: [DirectoryService(store: store)])
/// ```
public struct DirectoryService: Sendable {
  let store: any DirectoryStore & ChangeFeedStore
  let logger: Logger

  /// Creates the service over a shared store.
  public init(
    store: any DirectoryStore & ChangeFeedStore,
    logger: Logger = Logger(label: "roster.directory")
  ) {
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
    try await self.listEmployeesPage(request: request, context: context).message
  }

  /// Rows `StreamEmployees` has read from the store, over all calls.
  static let streamedRows = Counter(label: "roster_streamed_rows_total")

  /// Streams every matching employee, a page per message, as fast as the client reads
  /// (`streamPages`): the generated registration's. Every protocol's streams take
  /// `pageStreams`, which writes the same pages without building messages.
  public func streamEmployees(
    request: Roster_V1_ListEmployeesRequest,
    response: RPCWriter<Roster_V1_EmployeePage>,
    context: ServerContext
  ) async throws {
    try await self.streamPages(request, written: nil) {
      try await response.write(contentsOf: $0.map(\.message))
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
    try await self.getEmployeeReply(request: request, context: context).message
  }

  /// The employee with an e-mail address, its ASCII letters in any case; the one created first
  /// when several share it.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a missing `email`, one over 254 characters, or a bad
  /// `read_mask`; `NOT_FOUND` when no employee has it (a message that does not repeat it).
  public func lookupEmployee(
    request: Roster_V1_LookupEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_Employee {
    let email = try DirectoryRequests.email(request.email)
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil, ownRecord: true)
    return try await withStatusMapping("LookupEmployee", logger: self.logger) {
      let employee = try await self.store.employee(email: email, fields: mask.readFields)
      try mask.permit([employee])
      return Roster_V1_Employee(employee, mask: mask)
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
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil, ownRecord: true)
    return try await withStatusMapping("BatchGetEmployees", logger: self.logger) {
      let employees = try await self.store.employees(guids: guids, fields: mask.readFields)
      try mask.permit(employees)
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
      let count = try await self.store.countEmployees(filter: filter)
      return .with { $0.count = count }
    }
  }

  // MARK: Writes

  /// Creates an employee; a request without a guid gets a new one.
  ///
  /// Statuses: `INVALID_ARGUMENT` naming a missing or bad field (`employee.guid`, `name`,
  /// `department`, `start_date`, `vacation_days`, or a string over its limit);
  /// `ALREADY_EXISTS` for a taken guid; `RESOURCE_EXHAUSTED` when the writer is overloaded.
  public func createEmployee(
    request: Roster_V1_CreateEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_Employee {
    let employee = try DirectoryRequests.newEmployee(request.employee)
    return try await withStatusMapping("CreateEmployee", logger: self.logger) {
      let created = try await self.store.createEmployee(
        employee,
        context: RequestAuthor.writeContext
      )
      return Roster_V1_Employee(created, mask: .written)
    }
  }

  /// Changes the fields named by `update_mask` (or, with no mask, the fields the message
  /// sets) on the employee `employee.guid`.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a bad guid, an unknown or immutable path, or a bad
  /// value; `NOT_FOUND` for an unknown guid; `RESOURCE_EXHAUSTED` when the writer is
  /// overloaded; `PERMISSION_DENIED`, to a caller let in for their own record only, for
  /// another's record or a field that is not `self_editable`.
  public func updateEmployee(
    request: Roster_V1_UpdateEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_Employee {
    let guid = try DirectoryRequests.guid(request.employee.guid, field: "employee.guid")
    let changes = try DirectoryRequests.changes(
      request.employee,
      mask: request.hasUpdateMask ? request.updateMask : nil
    )
    if Caller.current?.ownRecordOnly == true,
      let field = changes.fields.first(where: { !PersonalFields.selfEditable.contains($0.rawValue) }
      )
    {
      throw RPCError(
        code: .permissionDenied,
        message: "update_mask: '\(field.rawValue)' needs the writer role; on your own record you "
          + "may change " + PersonalFields.selfEditable.sorted().joined(separator: ", ")
      )
    }
    return try await withStatusMapping("UpdateEmployee", logger: self.logger) {
      try await Caller.requireOwnRecord(guid: guid, field: "employee.guid", store: self.store)
      let updated = try await self.store.updateEmployee(
        guid: guid,
        changes: changes,
        context: RequestAuthor.writeContext
      )
      return Roster_V1_Employee(updated, mask: .written)
    }
  }

  /// Deletes an employee, with their thumbnail.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a missing or malformed guid; `NOT_FOUND` for an
  /// unknown one.
  public func deleteEmployee(
    request: Roster_V1_DeleteEmployeeRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeleteEmployeeResponse {
    let guid = try DirectoryRequests.guid(request.guid)
    return try await withStatusMapping("DeleteEmployee", logger: self.logger) {
      try await self.store.deleteEmployee(guid: guid, context: RequestAuthor.writeContext)
      return Roster_V1_DeleteEmployeeResponse()
    }
  }

  /// Merges a stream of employees by guid, committing in large chunks as rows arrive.
  ///
  /// Bad rows are reported in `rejected` with their index in the whole stream, and never
  /// stop good ones. A new guid needs `name`, `department` and `start_date`.
  /// Statuses: `OK` with the counts; `CANCELLED` if the client goes away (chunks already
  /// committed stay); `RESOURCE_EXHAUSTED` when the writer is overloaded.
  public func upsertEmployees(
    request: RPCAsyncSequence<Roster_V1_UpsertEmployeesRequest, any Error>,
    context: ServerContext
  ) async throws -> Roster_V1_UpsertEmployeesResponse {
    try await withStatusMapping("UpsertEmployees", logger: self.logger) {
      let rows = request.map { message in
        message.employees.map {
          UpsertRow(guid: $0.guid, changes: DirectoryRequests.presentFields($0))
        }
      }
      let summary = try await self.store.upsertEmployees(
        rows,
        context: RequestAuthor.writeContext,
        chunkRows: nil
      )
      return .with {
        $0.inserted = Int64(summary.inserted)
        $0.updated = Int64(summary.updated)
        $0.rejected = summary.rejected.map(Roster_V1_Rejection.init)
        $0.rejectedCount = Int64(summary.rejectedCount)
      }
    }
  }

  /// Sets `active`, `department` or `vacation_days` on every employee matching the filter,
  /// in one transaction.
  ///
  /// Statuses: `INVALID_ARGUMENT` for no filter without `all`, no `set_*` value, or a bad
  /// value.
  public func batchUpdateEmployees(
    request: Roster_V1_BatchUpdateEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_BatchUpdateEmployeesResponse {
    let filter = try DirectoryRequests.batchFilter(
      department: request.department,
      active: request.hasActive ? request.active : nil,
      nameContains: request.nameContains,
      all: request.all,
      verb: "update"
    )
    var changes = EmployeeChanges()
    if request.hasSetActive { changes.active = request.setActive }
    if request.hasSetDepartment { changes.department = request.setDepartment }
    if request.hasSetVacationDays { changes.vacationDays = Int(request.setVacationDays) }
    if changes.isEmpty {
      throw RPCError(
        code: .invalidArgument,
        message: "set_active, set_department or set_vacation_days must be set"
      )
    }
    return try await withStatusMapping("BatchUpdateEmployees", logger: self.logger) {
      let affected = try await self.store.batchUpdateEmployees(
        filter: filter,
        changes: changes,
        context: RequestAuthor.writeContext
      )
      return .with { $0.affected = Int64(affected) }
    }
  }

  /// Deletes up to `limit` employees matching the filter, a few hundred per transaction.
  ///
  /// Statuses: `INVALID_ARGUMENT` for no filter without `all`, or a negative `limit`.
  public func deleteEmployees(
    request: Roster_V1_DeleteEmployeesRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeleteEmployeesResponse {
    let filter = try DirectoryRequests.batchFilter(
      department: request.department,
      active: request.hasActive ? request.active : nil,
      nameContains: request.nameContains,
      all: request.all,
      verb: "delete"
    )
    let limit = try DirectoryRequests.deleteLimit(request.limit)
    return try await withStatusMapping("DeleteEmployees", logger: self.logger) {
      let (deleted, more) = try await self.store.deleteEmployees(
        filter: filter,
        limit: limit,
        context: RequestAuthor.writeContext
      )
      return .with {
        $0.deleted = Int64(deleted)
        $0.more = more
      }
    }
  }

  /// Replays the changes after `after_token`, then streams new ones as they commit.
  ///
  /// Each watcher reads the log at its own pace, so a slow one never holds up writers or
  /// other watchers, and no read transaction is held between messages.
  /// Statuses: `INVALID_ARGUMENT` for a malformed token; `OUT_OF_RANGE` for a token older
  /// than the retention window or past the end of the log (resync, then watch from now);
  /// `UNAVAILABLE` when the server shuts down (resume from the last token).
  public func watchChanges(
    request: Roster_V1_WatchChangesRequest,
    response: RPCWriter<Roster_V1_ChangeEvent>,
    context: ServerContext
  ) async throws {
    var last = try DirectoryRequests.changeToken(request.afterToken, now: self.store.latestChange)
    let heartbeat = try DirectoryRequests.heartbeatInterval(request)
    try await withStatusMapping("WatchChanges", logger: self.logger) {
      while true {
        try Task.checkCancellation()
        let changes: [Change]
        do {
          changes = try await self.store.changes(after: last, limit: Self.watchPage)
        } catch let error as StoreError where error.code == .outOfRange {
          throw RPCError(
            code: .outOfRange,
            message: "after_token: \(error.message); resync with ListEmployees, then watch from now"
          )
        }
        if let newest = changes.last {
          try await response.write(contentsOf: changes.map(Roster_V1_ChangeEvent.init))
          last = newest.sequence
          if changes.count == Self.watchPage { continue }
        }
        guard let heartbeat else {
          _ = try await self.store.waitForChanges(after: last)
          continue
        }
        if try await !self.waitForChanges(after: last, atMost: heartbeat) {
          try await response.write(
            .with {
              $0.heartbeat = true
              $0.token = String(last)
            }
          )
        }
      }
    }
  }

  /// Waits for a change after `last` for at most `interval`: whether one came.
  private func waitForChanges(after last: Int64, atMost interval: Duration) async throws -> Bool {
    try await withThrowingTaskGroup(of: Bool.self) { group in
      group.addTask {
        _ = try await self.store.waitForChanges(after: last)
        return true
      }
      group.addTask {
        try await Task.sleep(for: interval)
        return false
      }
      defer { group.cancelAll() }
      return try await group.next() ?? false
    }
  }

  /// Changes read per page while a watcher replays or catches up.
  private static let watchPage = 256
}
