internal import GRPCCore
internal import RosterDomain
internal import RosterProto
internal import RosterStore

/// Checks of Directory requests, each throwing `INVALID_ARGUMENT` that names the field.
enum DirectoryRequests {
  /// The page size used when a request leaves `page_size` at 0.
  static let defaultPageSize = 50
  /// The most guids one BatchGetEmployees may ask for.
  static let maximumBatchGet = 1000

  /// The canonical form of a guid a request must carry in `field`: the store's one check,
  /// whose `StoreError` ends the call as `INVALID_ARGUMENT` naming the field.
  static func guid(_ text: String, field: String = "guid") throws -> String {
    try EmployeeValidation.requireGUID(text, field: field)
  }

  /// The e-mail address a lookup asks for: present and no longer than a stored one.
  static func email(_ text: String) throws -> String {
    if text.isEmpty { throw StoreError(.invalidArgument, "email is required") }
    try EmployeeValidation.checkLength(
      text,
      field: "email",
      limit: EmployeeValidation.maximumEmailLength
    )
    return text
  }

  static func filter(
    department: String,
    active: Bool?,
    nameContains: String
  ) throws -> EmployeeFilter {
    try EmployeeValidation.checkLength(
      department,
      field: "department",
      limit: EmployeeValidation.maximumDepartmentLength
    )
    try EmployeeValidation.checkLength(
      nameContains,
      field: "name_contains",
      limit: EmployeeValidation.maximumNameLength
    )
    return EmployeeFilter(department: department, active: active, nameContains: nameContains)
  }

  static func pageSize(_ value: Int32) throws -> Int {
    if value < 0 {
      throw RPCError(code: .invalidArgument, message: "page_size must not be negative")
    }
    if value == 0 { return self.defaultPageSize }
    return min(Int(value), StoreLimits.maximumPageSize)
  }

  static func order(_ value: Roster_V1_EmployeeOrder) throws -> EmployeeOrder {
    switch value {
    case .unspecified, .name: return .name
    case .startDate: return .startDate
    case .department: return .department
    case .UNRECOGNIZED(let raw):
      throw RPCError(code: .invalidArgument, message: "order_by \(raw) is not a known order")
    }
  }

  /// The parsed form of a List or Stream request.
  struct Listing {
    var filter: EmployeeFilter
    var order: EmployeeOrder
    var mask: EmployeeReadMask
    var pageSize: Int
    var cursor: EmployeeCursor?
    var fingerprint: UInt64

    func token(after cursor: EmployeeCursor?) -> String {
      guard let cursor else { return "" }
      return PageToken(fingerprint: self.fingerprint, cursor: cursor).encoded()
    }
  }

  static func listing(_ request: Roster_V1_ListEmployeesRequest) throws -> Listing {
    let filter = try self.filter(
      department: request.department,
      active: request.hasActive ? request.active : nil,
      nameContains: request.nameContains
    )
    let order = try self.order(request.orderBy)
    let mask = try EmployeeReadMask(request.hasReadMask ? request.readMask : nil)
    let pageSize = try self.pageSize(request.pageSize)
    let fingerprint = PageToken.fingerprint(filter: filter, order: order)
    var cursor: EmployeeCursor?
    if !request.pageToken.isEmpty {
      guard let token = PageToken(decoding: request.pageToken) else {
        throw RPCError(code: .invalidArgument, message: "page_token is not a valid token")
      }
      guard token.fingerprint == fingerprint else {
        throw RPCError(
          code: .invalidArgument,
          message: "page_token was issued for other filters or another order_by"
        )
      }
      cursor = token.cursor
    }
    return Listing(
      filter: filter,
      order: order,
      mask: mask,
      pageSize: pageSize,
      cursor: cursor,
      fingerprint: fingerprint
    )
  }
}
