internal import GRPCCore
internal import NIOCore
internal import RosterProto
internal import RosterProtocols
internal import RosterServices
internal import RosterStore

extension UnaryFastPath {
  /// Roster's unary methods and their handlers. Where each runs (its connection's event loop or
  /// the cooperative pool) is its lane in the `.proto` (`MethodPolicies`).
  static func methods(
    directory: DirectoryService,
    pictures: PicturesService,
    analytics: AnalyticsService,
    health: HealthService
  ) -> [Method] {
    typealias Directory = Roster_V1_Directory.Method
    typealias Pictures = Roster_V1_Pictures.Method
    typealias Analytics = Roster_V1_Analytics.Method
    var getEmployee = Method.direct(Directory.GetEmployee.descriptor) {
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
      .protobuf(Directory.LookupEmployee.descriptor) {
        try await directory.lookupEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.CreateEmployee.descriptor) {
        try await directory.createEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.UpdateEmployee.descriptor) {
        try await directory.updateEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.DeleteEmployee.descriptor) {
        try await directory.deleteEmployee(request: $0, context: $1)
      },
      .direct(Directory.ListEmployees.descriptor) {
        try await directory.listEmployeesPage(
          request: $0,
          context: $1,
          written: $2 ? .binary : .json
        )
      },
      .protobuf(Directory.BatchGetEmployees.descriptor) {
        try await directory.batchGetEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.CountEmployees.descriptor) {
        try await directory.countEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.BatchUpdateEmployees.descriptor) {
        try await directory.batchUpdateEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.DeleteEmployees.descriptor) {
        try await directory.deleteEmployees(request: $0, context: $1)
      },
      .protobuf(Pictures.GetThumbnail.descriptor) {
        try await pictures.getThumbnail(request: $0, context: $1)
      },
      .protobuf(Pictures.DeletePicture.descriptor) {
        try await pictures.deletePicture(request: $0, context: $1)
      },
      .protobuf(Analytics.DepartmentHeadcounts.descriptor) {
        try await analytics.departmentHeadcounts(request: $0, context: $1)
      },
      .protobuf(Analytics.DepartmentSummary.descriptor) {
        try await analytics.departmentSummary(request: $0, context: $1)
      },
      .protobuf(Analytics.EmployeeSales.descriptor) {
        try await analytics.employeeSales(request: $0, context: $1)
      },
      .protobuf(Analytics.AggregateSales.descriptor) {
        try await analytics.aggregateSales(request: $0, context: $1)
      },
      .protobuf(Analytics.AggregateEmployees.descriptor) {
        try await analytics.aggregateEmployees(request: $0, context: $1)
      },
      .protobuf(Analytics.SalesCalendar.descriptor) {
        try await analytics.salesCalendar(request: $0, context: $1)
      },
      .protobuf(Analytics.DeleteSales.descriptor) {
        try await analytics.deleteSales(request: $0, context: $1)
      },
      .protobufNow(Grpc_Health_V1_Health.Method.Check.descriptor) { request, _ in
        try health.status(of: request)
      },
    ]
  }
}
