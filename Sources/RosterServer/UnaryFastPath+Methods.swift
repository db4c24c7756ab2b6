internal import GRPCCore
internal import NIOCore
internal import RosterProto
internal import RosterServices

extension UnaryFastPath {
  /// Roster's unary methods. Point reads start where their request arrives; point writes run on
  /// their connection's event loop; pages, batches and analytics, whose mapping grows with the
  /// reply, on the cooperative pool.
  static func methods(
    directory: DirectoryService,
    pictures: PicturesService,
    analytics: AnalyticsService,
    health: HealthService
  ) -> [Method] {
    typealias Directory = Roster_V1_Directory.Method
    typealias Pictures = Roster_V1_Pictures.Method
    typealias Analytics = Roster_V1_Analytics.Method
    return [
      .protobuf(Directory.GetEmployee.descriptor, placement: .inline) {
        try await directory.getEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.CreateEmployee.descriptor, placement: .eventLoop) {
        try await directory.createEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.UpdateEmployee.descriptor, placement: .eventLoop) {
        try await directory.updateEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.DeleteEmployee.descriptor, placement: .eventLoop) {
        try await directory.deleteEmployee(request: $0, context: $1)
      },
      .protobuf(Directory.ListEmployees.descriptor, placement: .cooperativePool) {
        try await directory.listEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.BatchGetEmployees.descriptor, placement: .cooperativePool) {
        try await directory.batchGetEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.CountEmployees.descriptor, placement: .cooperativePool) {
        try await directory.countEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.BatchUpdateEmployees.descriptor, placement: .cooperativePool) {
        try await directory.batchUpdateEmployees(request: $0, context: $1)
      },
      .protobuf(Directory.DeleteEmployees.descriptor, placement: .cooperativePool) {
        try await directory.deleteEmployees(request: $0, context: $1)
      },
      .protobuf(Pictures.GetThumbnail.descriptor, placement: .cooperativePool) {
        try await pictures.getThumbnail(request: $0, context: $1)
      },
      .protobuf(Pictures.DeletePicture.descriptor, placement: .cooperativePool) {
        try await pictures.deletePicture(request: $0, context: $1)
      },
      .protobuf(Analytics.DepartmentHeadcounts.descriptor, placement: .cooperativePool) {
        try await analytics.departmentHeadcounts(request: $0, context: $1)
      },
      .protobuf(Analytics.DepartmentSummary.descriptor, placement: .cooperativePool) {
        try await analytics.departmentSummary(request: $0, context: $1)
      },
      .protobuf(Analytics.EmployeeSales.descriptor, placement: .cooperativePool) {
        try await analytics.employeeSales(request: $0, context: $1)
      },
      .protobuf(Analytics.AggregateSales.descriptor, placement: .cooperativePool) {
        try await analytics.aggregateSales(request: $0, context: $1)
      },
      .protobuf(Analytics.AggregateEmployees.descriptor, placement: .cooperativePool) {
        try await analytics.aggregateEmployees(request: $0, context: $1)
      },
      .protobuf(Analytics.SalesCalendar.descriptor, placement: .cooperativePool) {
        try await analytics.salesCalendar(request: $0, context: $1)
      },
      .protobuf(Analytics.DeleteSales.descriptor, placement: .cooperativePool) {
        try await analytics.deleteSales(request: $0, context: $1)
      },
      .protobuf(Grpc_Health_V1_Health.Method.Check.descriptor, placement: .inline) {
        try await health.check(request: $0, context: $1)
      },
    ]
  }

  /// The transport's stream initializer: puts a `UnaryStreamHandler` first in every new
  /// HTTP/2 stream; its point calls run on the stream's event loop through `executor`.
  func streamInitializer(
    executor: EventLoopGroupExecutor
  ) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
    { channel in
      channel.eventLoop.makeCompletedFuture {
        try channel.pipeline.syncOperations.addHandler(
          UnaryStreamHandler(fastPath: self, executor: executor),
          position: .first
        )
      }
    }
  }
}
