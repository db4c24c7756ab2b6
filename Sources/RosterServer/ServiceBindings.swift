internal import GRPCCore
internal import RosterProto
internal import RosterProtocols
internal import RosterServices
internal import SwiftProtobuf

/// Every method the services define, bound to these service instances: the services'
/// generated bindings (`RosterProtocols/Generated/Bindings.swift`, one per method, from the
/// descriptors), with the few bound by hand here in their place. A new method needs nothing
/// here: its generated binding calls its handler.
struct ServiceBindings {
  let directory: DirectoryService
  let pictures: PicturesService
  let analytics: AnalyticsService
  let health: HealthService
  let reflection: ReflectionService

  /// How long a `WatchChanges` stream over Connect or gRPC-Web waits quiet before a heartbeat,
  /// unless its request says.
  static let defaultHeartbeat = Google_Protobuf_Duration(seconds: 15)

  /// The unary methods, for the fast path. Bound by hand: the two whose replies the service
  /// writes from the store's rows (`direct`), `GetEmployee` also as a point call when the store
  /// has them, and `Health.Check`, which never waits (`protobufNow`). Every one is refused
  /// before it starts when the store says it could not start in time (`StoreAdmission`).
  var unary: [UnaryFastPath.Method] {
    typealias Directory = Roster_V1_Directory.Method
    let (directory, health) = (directory, health)
    var getEmployee = UnaryFastPath.Method.direct(Directory.GetEmployee.descriptor) {
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
    let generated =
      directory.unaryMethods + pictures.unaryMethods + analytics.unaryMethods
      + health.unaryMethods
    let admission = directory.admission
    return generated.replacing(with: [
      getEmployee,
      .direct(Directory.ListEmployees.descriptor) {
        try await directory.listEmployeesPage(
          request: $0,
          context: $1,
          written: $2 ? .binary : .json
        )
      },
      .protobufNow(Grpc_Health_V1_Health.Method.Check.descriptor) { request, _ in
        try health.status(of: request)
      },
    ]).map { $0.admitted(by: admission) }
  }

  /// The streaming methods, for every protocol. Bound by hand: `StreamEmployees`, whose pages
  /// the service writes from the store's rows (`DirectoryPageStreams`), and `WatchChanges`,
  /// whose streams over the Connect protocol and gRPC-Web get a heartbeat by default.
  var streaming: [StreamingMethod] {
    typealias Directory = Roster_V1_Directory.Method
    let directory = directory
    let generated =
      directory.streamingMethods + pictures.streamingMethods + analytics.streamingMethods
      + health.streamingMethods + reflection.streamingMethods
      + reflection.v1alpha.streamingMethods
    return generated.replacing(with: [
      .registered(Directory.StreamEmployees.descriptor, by: directory.pageStreams),
      .of(
        Directory.WatchChanges.descriptor,
        prepare: { if !$0.hasHeartbeatInterval { $0.heartbeatInterval = Self.defaultHeartbeat } }
      ) {
        try await directory.watchChanges(request: $0, context: $1)
      },
    ])
  }
}
