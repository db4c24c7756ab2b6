internal import GRPCCore
internal import RosterProto
internal import RosterProtocols
internal import RosterServices
internal import SwiftProtobuf

extension StreamingMethod {
  /// How long a `WatchChanges` stream over Connect or gRPC-Web waits quiet before a heartbeat,
  /// unless its request says.
  static let defaultHeartbeat = Google_Protobuf_Duration(seconds: 15)

  /// Every streaming method the services define, bound to these service instances.
  static func all(
    directory: DirectoryService,
    pictures: PicturesService,
    analytics: AnalyticsService,
    health: HealthService,
    reflection: ReflectionService
  ) -> [StreamingMethod] {
    typealias Directory = Roster_V1_Directory.Method
    let alpha = reflection.v1alpha
    return [
      .registered(Directory.StreamEmployees.descriptor, input: Roster_V1_ListEmployeesRequest.self)
      {
        router,
        deserializer,
        json in
        directory.pageStreams(json ? .json : .binary).register(
          with: &router,
          deserializer: deserializer
        )
      },
      .of(
        Directory.WatchChanges.descriptor,
        prepare: { if !$0.hasHeartbeatInterval { $0.heartbeatInterval = Self.defaultHeartbeat } }
      ) {
        try await directory.watchChanges(request: $0, context: $1)
      },
      .of(Directory.UpsertEmployees.descriptor) {
        try await directory.upsertEmployees(request: $0, context: $1)
      },
      .of(Roster_V1_Pictures.Method.GetPicture.descriptor) {
        try await pictures.getPicture(request: $0, context: $1)
      },
      .of(Roster_V1_Pictures.Method.PutPicture.descriptor) {
        try await pictures.putPicture(request: $0, context: $1)
      },
      .of(Roster_V1_Analytics.Method.ImportSales.descriptor) {
        try await analytics.importSales(request: $0, context: $1)
      },
      .of(Grpc_Health_V1_Health.Method.Watch.descriptor) {
        try await health.watch(request: $0, context: $1)
      },
      .of(Grpc_Reflection_V1_ServerReflection.Method.ServerReflectionInfo.descriptor) {
        try await reflection.serverReflectionInfo(request: $0, context: $1)
      },
      .of(Grpc_Reflection_V1alpha_ServerReflection.Method.ServerReflectionInfo.descriptor) {
        try await alpha.serverReflectionInfo(request: $0, context: $1)
      },
    ]
  }
}
