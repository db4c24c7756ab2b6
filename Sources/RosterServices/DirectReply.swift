internal import RosterDomain
public import RosterProto
internal import RosterStore
public import SwiftProtobuf

/// A reply the fast path writes in protobuf's binary form (`EmployeeWire`) or in proto3 JSON
/// (`EmployeeJSON`) straight from what the store read, without building `message` first; the
/// other paths take `message`.
public protocol DirectReply: Sendable {
  associatedtype Message: SwiftProtobuf.Message
  /// The reply as a protobuf message (grpc-swift's path, JSON).
  var message: Message { get }
  /// `message`'s protobuf binary form.
  func binary() -> [UInt8]
  /// `message`'s proto3 JSON form.
  func json() -> [UInt8]
}

/// A `GetEmployee` reply as read: the store's employee and the read mask.
public struct EmployeeReply: DirectReply {
  let employee: Employee
  let mask: EmployeeReadMask

  public var message: Roster_V1_Employee { Roster_V1_Employee(self.employee, mask: self.mask) }

  public func binary() -> [UInt8] { EmployeeWire.employee(self.employee, mask: self.mask) }

  public func json() -> [UInt8] { EmployeeJSON.employee(self.employee, mask: self.mask) }
}

/// The form a store writes a page's rows in as it reads them: protobuf's binary form
/// (`EmployeeWire.Rows`) or proto3 JSON (`EmployeeJSON.Rows`), for a reply that goes out in it.
public enum WrittenFormat: Sendable {
  case binary
  case json
}

/// How the current call's messages travel: the form they are written in, and whether the call
/// came through one of the browser-facing protocols (the Connect protocol, gRPC-Web) rather than
/// gRPC. The protocol layer binds it for each call it hands to the server, for the call's task;
/// the serializers the streaming methods are registered with read it, so every protocol's
/// streams run through one router with the codec the call needs. A call with nothing bound is
/// gRPC's.
public struct CallWire: Sendable, Equatable {
  public var format: WrittenFormat
  public var web: Bool

  public init(format: WrittenFormat, web: Bool) {
    self.format = format
    self.web = web
  }

  public static let grpc = CallWire(format: .binary, web: false)

  @TaskLocal public static var current: CallWire = .grpc
}

/// A page of employees as read, with the read mask and the next token: the store's employees,
/// turned into protobuf only when written, or the rows as the store wrote them (`written`,
/// for a reply that goes out in the binary form). `ListEmployees` replies with a
/// `ListEmployeesResponse`, and each `StreamEmployees` message is an `EmployeePage`: the same
/// fields with the same numbers, so the same bytes.
public struct EmployeePageReply<Message: EmployeePageMessage>: DirectReply {
  enum Rows {
    case employees([Employee])
    /// The rows' `employees = 1` entries, as `EmployeeWire.Rows` wrote them.
    /// The rows as the store wrote them, in `WrittenFormat`.
    case written(WrittenEmployeePage, WrittenFormat)
  }

  let rows: Rows
  let mask: EmployeeReadMask
  let nextPageToken: String

  init(employees: [Employee], mask: EmployeeReadMask, nextPageToken: String) {
    self.rows = .employees(employees)
    self.mask = mask
    self.nextPageToken = nextPageToken
  }

  init(
    written page: WrittenEmployeePage,
    format: WrittenFormat,
    mask: EmployeeReadMask,
    nextPageToken: String
  ) {
    self.rows = .written(page, format)
    self.mask = mask
    self.nextPageToken = nextPageToken
  }

  /// The rows in the page.
  var rowCount: Int {
    switch self.rows {
    case .employees(let employees): employees.count
    case .written(let page, _): page.rowCount
    }
  }

  /// The message; for written rows, decoded from their bytes (debug builds' check of them).
  public var message: Message {
    switch self.rows {
    case .employees(let employees):
      .with {
        $0.employees = employees.map { Roster_V1_Employee($0, mask: self.mask) }
        $0.nextPageToken = self.nextPageToken
      }
    case .written(_, .binary):
      // Bytes EmployeeWire wrote always decode, as does EmployeeJSON's text.
      try! Message(serializedBytes: self.binary())
    case .written(_, .json):
      try! Message(jsonUTF8Bytes: self.json())
    }
  }

  public func binary() -> [UInt8] {
    switch self.rows {
    case .employees(let employees):
      EmployeeWire.page(employees, mask: self.mask, nextPageToken: self.nextPageToken)
    case .written(let page, .binary):
      EmployeeWire.page(written: page.bytes, nextPageToken: self.nextPageToken)
    case .written(_, .json):
      // Rows written as JSON are read for a JSON reply only; should one be asked for the
      // binary form, its message says it.
      try! self.message.serializedBytes()
    }
  }

  public func json() -> [UInt8] {
    switch self.rows {
    case .employees(let employees):
      return EmployeeJSON.page(employees, mask: self.mask, nextPageToken: self.nextPageToken)
    case .written(let page, .json):
      return EmployeeJSON.page(written: page.bytes, nextPageToken: self.nextPageToken)
    case .written(_, .binary):
      // Rows written in the binary form are read for a binary reply only; should one be
      // asked for JSON, its message says it.
      var options = JSONEncodingOptions()
      options.useDeterministicOrdering = true
      return try! self.message.jsonUTF8Bytes(options: options)
    }
  }
}

/// A protobuf message of a page of employees: `employees = 1`, `next_page_token = 2`.
public protocol EmployeePageMessage: SwiftProtobuf.Message {
  var employees: [Roster_V1_Employee] { get set }
  var nextPageToken: String { get set }
}

extension Roster_V1_ListEmployeesResponse: EmployeePageMessage {}
extension Roster_V1_EmployeePage: EmployeePageMessage {}
