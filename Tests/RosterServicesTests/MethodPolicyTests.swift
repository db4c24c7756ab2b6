import Foundation
import GRPCCore
import RosterProto
import SwiftProtobuf
import Testing

@testable import RosterServices

/// Each method's policy is declared once, next to it in the `.proto` (`roster.v1.policy`), and
/// every table the server keeps by method is derived from the descriptors (`MethodPolicies`).
@Suite("Method policies from the descriptors")
struct MethodPolicyTests {
  static let rosterServices: Set<String> = [
    "roster.v1.Directory", "roster.v1.Pictures", "roster.v1.Analytics",
  ]

  @Test("every method of Roster's services declares a role, and a lane when it is unary")
  func everyMethodDeclared() {
    let policies = MethodPolicies.server
    #expect(policies.undeclared(in: Self.rosterServices) == [])
    let methods =
      Roster_V1_Directory.Method.descriptors + Roster_V1_Pictures.Method.descriptors
      + Roster_V1_Analytics.Method.descriptors
    // The generated stubs and the descriptors hold the same methods.
    let described = Set(
      policies.byMethod.keys.filter {
        Self.rosterServices.contains($0.service.fullyQualifiedService)
      }
    )
    #expect(described == Set(methods))
    // The upstream services are there too (they stream or not), with no policy of Roster's.
    let check = policies.byMethod[Grpc_Health_V1_Health.Method.Check.descriptor]
    #expect(
      check == .init(streams: false, readOnly: false, role: nil, lane: nil, perClientStream: false)
    )
    #expect(policies.byMethod[Grpc_Health_V1_Health.Method.Watch.descriptor]?.streams == true)
  }

  @Test("the declared facts, as the server uses them")
  func declaredFacts() {
    typealias D = Roster_V1_Directory.Method
    let policies = MethodPolicies.server
    #expect(policies.byMethod[D.GetEmployee.descriptor]?.role == .reader)
    #expect(policies.byMethod[D.GetEmployee.descriptor]?.lane == .eventLoop)
    #expect(policies.byMethod[D.CreateEmployee.descriptor]?.lane == .eventLoop)
    #expect(policies.byMethod[D.ListEmployees.descriptor]?.lane == .pool)
    #expect(policies.byMethod[D.BatchUpdateEmployees.descriptor]?.role == .admin)
    let perClient = Set(MethodFacts.server.filter { $0.value.perClientStream }.keys)
    #expect(perClient == [D.StreamEmployees.descriptor, D.WatchChanges.descriptor])
    #expect(MethodFacts.of(D.UpsertEmployees.descriptor).streams)
    #expect(
      MethodFacts.of(Grpc_Reflection_V1_ServerReflection.Method.ServerReflectionInfo.descriptor)
        .streams
    )
    #expect(!MethodFacts.of(D.GetEmployee.descriptor).streams)
  }

  @Test("each method's facts, found once per call, as each interceptor needs them")
  func facts() {
    typealias D = Roster_V1_Directory.Method
    let indices = MethodFacts.server.values.compactMap(\.index)
    #expect(Set(indices).count == MethodPolicies.server.byMethod.count, "one index per method")
    #expect(MethodFacts.of(D.GetEmployee.descriptor).required == .reader)
    #expect(MethodFacts.of(D.DeleteEmployees.descriptor).required == .admin)
    #expect(MethodFacts.of(Grpc_Health_V1_Health.Method.Check.descriptor).required == nil)
    let unknown = MethodFacts.of(
      MethodDescriptor(fullyQualifiedService: "roster.v1.Directory", method: "Nope", type: .unary)
    )
    #expect(unknown.index == nil)
    #expect(unknown.required == .admin, "a method nobody declared is closed")
    #expect(!unknown.streams && !unknown.perClientStream)
  }

  @Test("a method that leaves out its role or lane, or a stream that names a lane, is named")
  func incompletePoliciesAreNamed() throws {
    var set = try Google_Protobuf_FileDescriptorSet(
      serializedBytes: RosterDescriptors.fileDescriptorSet,
      extensions: Roster_V1_Options_Extensions
    )
    let file = try #require(set.file.firstIndex { $0.name == "roster/v1/directory.proto" })
    let service = try #require(set.file[file].service.firstIndex { $0.name == "Directory" })
    func edit(_ name: String, _ change: (inout Roster_V1_MethodPolicy) -> Void) throws {
      let methods = set.file[file].service[service].method
      let index = try #require(methods.firstIndex { $0.name == name })
      change(&set.file[file].service[service].method[index].options.Roster_V1_policy)
    }
    try edit("GetEmployee") { $0.role = .unspecified }
    try edit("CountEmployees") { $0.lane = .unspecified }
    try edit("WatchChanges") { $0.lane = .pool }
    let policies = MethodPolicies(set)
    #expect(
      policies.undeclared(in: Self.rosterServices) == [
        "roster.v1.Directory/CountEmployees: a unary method without a lane",
        "roster.v1.Directory/GetEmployee: no role",
        "roster.v1.Directory/WatchChanges: a streaming method with a lane",
      ]
    )
    // A method that declares no role needs admin once the server trusts these descriptors.
    #expect(policies.byMethod[Roster_V1_Directory.Method.GetEmployee.descriptor]?.role == nil)
  }
}
