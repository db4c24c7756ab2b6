public import RosterProto
internal import RosterDomain
public import SwiftProtobuf

/// A reply the fast path writes in protobuf's binary form straight from what the store read
/// (`EmployeeWire`), without building `message` first; the other paths take `message`.
public protocol DirectReply: Sendable {
  associatedtype Message: SwiftProtobuf.Message
  /// The reply as a protobuf message (grpc-swift's path, JSON).
  var message: Message { get }
  /// `message`'s protobuf binary form.
  func binary() -> [UInt8]
}

/// A `GetEmployee` reply as read: the store's employee and the read mask.
public struct EmployeeReply: DirectReply {
  let employee: Employee
  let mask: EmployeeReadMask

  public var message: Roster_V1_Employee { Roster_V1_Employee(self.employee, mask: self.mask) }

  public func binary() -> [UInt8] { EmployeeWire.employee(self.employee, mask: self.mask) }
}

/// A page of employees as read: the store's employees, the read mask and the next token,
/// turned into protobuf only when written. `ListEmployees` replies with a
/// `ListEmployeesResponse`, and each `StreamEmployees` message is an `EmployeePage`: the same
/// fields with the same numbers, so the same bytes.
public struct EmployeePageReply<Message: EmployeePageMessage>: DirectReply {
  let employees: [Employee]
  let mask: EmployeeReadMask
  let nextPageToken: String

  public var message: Message {
    .with {
      $0.employees = self.employees.map { Roster_V1_Employee($0, mask: self.mask) }
      $0.nextPageToken = self.nextPageToken
    }
  }

  public func binary() -> [UInt8] {
    EmployeeWire.page(self.employees, mask: self.mask, nextPageToken: self.nextPageToken)
  }
}

/// A protobuf message of a page of employees: `employees = 1`, `next_page_token = 2`.
public protocol EmployeePageMessage: SwiftProtobuf.Message {
  var employees: [Roster_V1_Employee] { get set }
  var nextPageToken: String { get set }
}

extension Roster_V1_ListEmployeesResponse: EmployeePageMessage {}
extension Roster_V1_EmployeePage: EmployeePageMessage {}
