import GRPCCore
import RosterProto
import RosterServices
import SwiftProtobuf
import Testing

@testable import RosterProtocols

/// The generated bindings (`Generated/Bindings.swift`) and the hand-made ones put in their
/// place (`replacing(with:)`).
@Suite("Bound methods")
struct BoundMethodTests {
  typealias Health = Grpc_Health_V1_Health.Method

  @Test("each service binds every method its descriptor declares, by kind")
  func generatedBindings() throws {
    let set = try Google_Protobuf_FileDescriptorSet(
      serializedBytes: RosterDescriptors.fileDescriptorSet
    )
    func declared(_ service: ServiceDescriptor, streaming: Bool) -> [String] {
      let package = service.fullyQualifiedService.split(separator: ".").dropLast()
        .joined(separator: ".")
      let name = service.fullyQualifiedService.split(separator: ".").last.map(String.init)
      let file = set.file.first { $0.package == package && $0.service.contains { $0.name == name } }
      let methods = file?.service.first { $0.name == name }?.method ?? []
      return methods.filter { ($0.clientStreaming || $0.serverStreaming) == streaming }
        .map { "\(service.fullyQualifiedService)/\($0.name)" }
    }
    let health = HealthService(services: [])
    let reflection = try ReflectionService()
    #expect(
      health.unaryMethods.map(\.descriptor.fullyQualifiedMethod)
        == declared(Grpc_Health_V1_Health.descriptor, streaming: false)
    )
    #expect(
      health.streamingMethods.map(\.descriptor.fullyQualifiedMethod)
        == declared(Grpc_Health_V1_Health.descriptor, streaming: true)
    )
    #expect(
      reflection.streamingMethods.map(\.descriptor.fullyQualifiedMethod)
        == declared(Grpc_Reflection_V1_ServerReflection.descriptor, streaming: true)
    )
    #expect(!declared(Grpc_Health_V1_Health.descriptor, streaming: false).isEmpty)
  }

  @Test("a replacement takes its method's place and keeps the order")
  func replacing() {
    let health = HealthService(services: [])
    let generated: [UnaryFastPath.Method] =
      [
        .protobuf(Roster_V1_Directory.Method.CountEmployees.descriptor) {
          (_: Roster_V1_CountEmployeesRequest, _) in Roster_V1_CountEmployeesResponse()
        }
      ] + health.unaryMethods
    #expect(generated.allSatisfy { $0.now == nil })
    let bound = generated.replacing(with: [
      .protobufNow(Health.Check.descriptor) { request, _ in try health.status(of: request) }
    ])
    #expect(
      bound.map(\.descriptor) == [
        Roster_V1_Directory.Method.CountEmployees.descriptor, Health.Check.descriptor,
      ]
    )
    #expect(bound[0].now == nil)
    #expect(bound[1].now != nil)
  }
}
