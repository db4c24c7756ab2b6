internal import GRPCCore
internal import NIOCore
internal import RosterProto
internal import RosterServices
internal import RosterStore

extension UnaryFastPath {
  /// Roster's unary methods. Point reads and writes run on their connection's event loop; pages,
  /// batches and analytics, whose mapping grows with the reply, on the cooperative pool.
  static func methods(
    directory: DirectoryService,
    pictures: PicturesService,
    analytics: AnalyticsService,
    health: HealthService
  ) -> [Method] {
    typealias Directory = Roster_V1_Directory.Method
    typealias Pictures = Roster_V1_Pictures.Method
    typealias Analytics = Roster_V1_Analytics.Method
    var getEmployee = Method.direct(Directory.GetEmployee.descriptor, onEventLoop: true) {
      (request: Roster_V1_GetEmployeeRequest, context, _) in
      try await directory.getEmployeeReply(request: request, context: context)
    }
    if let store = directory.pointCalls {
      getEmployee = getEmployee.answeringNow(
        in: store,
        { request, context in
          try directory.getEmployeeReplyNow(request: request, context: context, store: store)
        },
        serialize: UnaryFastPath.serialize(direct:format:)
      )
    }
    return [
      getEmployee,
      .protobuf(Directory.CreateEmployee.descriptor, onEventLoop: true) {
        try await directory.createEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.UpdateEmployee.descriptor, onEventLoop: true) {
        try await directory.updateEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.DeleteEmployee.descriptor, onEventLoop: true) {
        try await directory.deleteEmployee(request: $0, context: $1)
      },
      .direct(Directory.ListEmployees.descriptor, onEventLoop: false) {
        try await directory.listEmployeesPage(request: $0, context: $1, written: $2)
      },
      .protobuf(Directory.BatchGetEmployees.descriptor, onEventLoop: false) {
        try await directory.batchGetEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.CountEmployees.descriptor, onEventLoop: false) {
        try await directory.countEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.BatchUpdateEmployees.descriptor, onEventLoop: false) {
        try await directory.batchUpdateEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.DeleteEmployees.descriptor, onEventLoop: false) {
        try await directory.deleteEmployees(request: $0, context: $1)
      },
      .protobuf(Pictures.GetThumbnail.descriptor, onEventLoop: false) {
        try await pictures.getThumbnail(request: $0, context: $1)
      },
      .protobuf(Pictures.DeletePicture.descriptor, onEventLoop: false) {
        try await pictures.deletePicture(request: $0, context: $1)
      },
      .protobuf(Analytics.DepartmentHeadcounts.descriptor, onEventLoop: false) {
        try await analytics.departmentHeadcounts(request: $0, context: $1)
      },
      .protobuf(Analytics.DepartmentSummary.descriptor, onEventLoop: false) {
        try await analytics.departmentSummary(request: $0, context: $1)
      },
      .protobuf(Analytics.EmployeeSales.descriptor, onEventLoop: false) {
        try await analytics.employeeSales(request: $0, context: $1)
      },
      .protobuf(Analytics.AggregateSales.descriptor, onEventLoop: false) {
        try await analytics.aggregateSales(request: $0, context: $1)
      },
      .protobuf(Analytics.AggregateEmployees.descriptor, onEventLoop: false) {
        try await analytics.aggregateEmployees(request: $0, context: $1)
      },
      .protobuf(Analytics.SalesCalendar.descriptor, onEventLoop: false) {
        try await analytics.salesCalendar(request: $0, context: $1)
      },
      .protobuf(Analytics.DeleteSales.descriptor, onEventLoop: false) {
        try await analytics.deleteSales(request: $0, context: $1)
      },
      .protobufNow(Grpc_Health_V1_Health.Method.Check.descriptor) { request, _ in
        try health.status(of: request)
      },
    ]
  }
}
