internal import Foundation
package import GRPCCore
internal import GRPCProtobuf
internal import NIOCore
package import RosterProto
package import RosterServices
package import SwiftProtobuf

/// One streaming method as the server registers it: its kind, and its handler with messages in
/// the form each call's `CallWire` says (protobuf for gRPC, gRPC-Web and `connect+proto`; JSON
/// for `connect+json`, read and written directly, never through the binary form). One
/// registration serves every protocol's calls of the method.
package struct StreamingMethod: Sendable {
  package let descriptor: MethodDescriptor
  let clientStreaming: Bool
  let serverStreaming: Bool
  private let registration: any StreamingRegistration

  private init(_ descriptor: MethodDescriptor, _ registration: any StreamingRegistration) {
    // The generated descriptor carries the method's kind.
    self.descriptor = descriptor
    self.clientStreaming = descriptor.type?.isRequestStreaming ?? false
    self.serverStreaming = descriptor.type?.isResponseStreaming ?? false
    self.registration = registration
  }

  /// Registers the method's handler on `router`, replacing any earlier registration of it.
  package func register<Transport: ServerTransport>(on router: inout RPCRouter<Transport>) {
    self.registration.register(on: &router)
  }

  /// A method a service registers itself, given the request's deserializer (for a method whose
  /// replies the service writes itself, in the call's form: `DirectoryPageStreams`).
  package static func registered<Service: RegistersWithDeserializer>(
    _ descriptor: MethodDescriptor,
    by service: Service
  ) -> StreamingMethod {
    StreamingMethod(descriptor, ServiceRegistration(service: service))
  }

  /// A method with `handler`; `prepare` sets defaults in a request that came over the Connect
  /// protocol or gRPC-Web.
  package static func of<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>(
    _ descriptor: MethodDescriptor,
    prepare: (@Sendable (inout Input) -> Void)? = nil,
    _ handler:
      @escaping @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) -> StreamingMethod {
    StreamingMethod(
      descriptor,
      HandlerRegistration(descriptor: descriptor, prepare: prepare, handler: handler)
    )
  }
}

/// A service that registers a method with the deserializer it is given.
package protocol RegistersWithDeserializer: Sendable {
  associatedtype Input: SwiftProtobuf.Message
  func register<Transport: ServerTransport>(
    with router: inout RPCRouter<Transport>,
    deserializer: some MessageDeserializer<Input>
  )
}

extension DirectoryPageStreams: RegistersWithDeserializer {
  package typealias Input = Roster_V1_ListEmployeesRequest
}

private protocol StreamingRegistration: Sendable {
  func register<Transport: ServerTransport>(on router: inout RPCRouter<Transport>)
}

private struct HandlerRegistration<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>:
  StreamingRegistration
{
  let descriptor: MethodDescriptor
  let prepare: (@Sendable (inout Input) -> Void)?
  let handler:
    @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>

  func register<Transport: ServerTransport>(on router: inout RPCRouter<Transport>) {
    router.registerHandler(
      forMethod: self.descriptor,
      deserializer: WireDeserializer<Input>(prepare: self.prepare),
      serializer: WireSerializer<Output>(),
      handler: self.handler
    )
  }
}

private struct ServiceRegistration<Service: RegistersWithDeserializer>: StreamingRegistration {
  let service: Service

  func register<Transport: ServerTransport>(on router: inout RPCRouter<Transport>) {
    self.service.register(
      with: &router,
      deserializer: WireDeserializer<Service.Input>(prepare: nil)
    )
  }
}

/// A message in the call's form (`CallWire`): protobuf's binary form, or the proto3 JSON
/// mapping in a stable field order.
struct WireSerializer<Message: SwiftProtobuf.Message>: MessageSerializer {
  func serialize<Bytes: GRPCContiguousBytes>(_ message: Message) throws -> Bytes {
    guard CallWire.current.format == .json else {
      return try ProtobufSerializer<Message>().serialize(message)
    }
    var options = JSONEncodingOptions()
    options.useDeterministicOrdering = true
    return Bytes(try message.jsonUTF8Bytes(options: options) as [UInt8])
  }
}

/// A request in the call's form (`CallWire`): grpc-swift's protobuf deserializer, or the JSON
/// reader (`JSONMessages`); then, for a call over the Connect protocol or gRPC-Web, the
/// method's defaults.
struct WireDeserializer<Message: SwiftProtobuf.Message>: MessageDeserializer {
  let prepare: (@Sendable (inout Message) -> Void)?

  func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Message {
    let wire = CallWire.current
    var message: Message
    if wire.format == .json {
      let buffer = serializedMessageBytes.withUnsafeBytes { ByteBuffer(bytes: $0) }
      message = try JSONMessages.decode(Message.self, from: buffer)
    } else {
      message = try ProtobufDeserializer<Message>().deserialize(serializedMessageBytes)
    }
    if wire.web, let prepare = self.prepare { prepare(&message) }
    return message
  }
}
