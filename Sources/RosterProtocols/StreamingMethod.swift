internal import Foundation
package import GRPCCore
internal import GRPCProtobuf
internal import NIOCore
internal import RosterProto
internal import RosterServices
package import SwiftProtobuf

/// One streaming method as the Connect protocol and gRPC-Web serve it: its kind, and how to
/// register its handler on a bridge's router with the messages in JSON or in protobuf (so a
/// `connect+json` call's messages are read from and written to JSON directly, never through
/// the binary form).
package struct StreamingMethod: Sendable {
  package let descriptor: MethodDescriptor
  let clientStreaming: Bool
  let serverStreaming: Bool
  /// Registers the method's handler on `router`, its messages in JSON or in protobuf.
  let register: @Sendable (_ router: inout RPCRouter<CallBridge>, _ json: Bool) -> Void

  /// A method registered by `register`, given the request's deserializer for the call's
  /// messages (JSON or protobuf) and whether they are JSON: for a method whose replies a
  /// service writes itself (`DirectoryPageStreams`).
  package static func registered<Input: SwiftProtobuf.Message>(
    _ descriptor: MethodDescriptor,
    input: Input.Type,
    _ register:
      @escaping @Sendable (
        _ router: inout RPCRouter<CallBridge>, _ deserializer: any MessageDeserializer<Input>,
        _ json: Bool
      ) -> Void
  ) -> StreamingMethod {
    StreamingMethod(
      descriptor: descriptor,
      clientStreaming: descriptor.type?.isRequestStreaming ?? false,
      serverStreaming: descriptor.type?.isResponseStreaming ?? false
    ) { router, json in
      if json {
        register(&router, JSONDeserializer<Input>(prepare: nil), true)
      } else {
        register(&router, PreparingProtobufDeserializer<Input>(prepare: nil), false)
      }
    }
  }

  package static func of<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>(
    _ descriptor: MethodDescriptor,
    prepare: (@Sendable (inout Input) -> Void)? = nil,
    _ handler:
      @escaping @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) -> StreamingMethod {
    // The generated descriptor carries the method's kind.
    StreamingMethod(
      descriptor: descriptor,
      clientStreaming: descriptor.type?.isRequestStreaming ?? false,
      serverStreaming: descriptor.type?.isResponseStreaming ?? false
    ) {
      router,
      json in
      if json {
        router.registerHandler(
          forMethod: descriptor,
          deserializer: JSONDeserializer<Input>(prepare: prepare),
          serializer: JSONSerializer<Output>(),
          handler: handler
        )
      } else {
        router.registerHandler(
          forMethod: descriptor,
          deserializer: PreparingProtobufDeserializer<Input>(prepare: prepare),
          serializer: ProtobufSerializer<Output>(),
          handler: handler
        )
      }
    }
  }
}

/// Messages in the proto3 JSON mapping, as a bridge's `GRPCServer` reads and writes them for
/// `connect+json` calls: output in a stable field order; input through `JSONMessages`.
struct JSONSerializer<Message: SwiftProtobuf.Message>: MessageSerializer {
  func serialize<Bytes: GRPCContiguousBytes>(_ message: Message) throws -> Bytes {
    var options = JSONEncodingOptions()
    options.useDeterministicOrdering = true
    return Bytes(try message.jsonUTF8Bytes(options: options) as [UInt8])
  }
}

struct JSONDeserializer<Message: SwiftProtobuf.Message>: MessageDeserializer {
  let prepare: (@Sendable (inout Message) -> Void)?

  func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Message {
    let buffer = serializedMessageBytes.withUnsafeBytes { ByteBuffer(bytes: $0) }
    var message = try JSONMessages.decode(Message.self, from: buffer)
    self.prepare?(&message)
    return message
  }
}

/// grpc-swift's protobuf deserializer, then the method's defaults.
struct PreparingProtobufDeserializer<Message: SwiftProtobuf.Message>: MessageDeserializer {
  let prepare: (@Sendable (inout Message) -> Void)?

  func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Message {
    var message = try ProtobufDeserializer<Message>().deserialize(serializedMessageBytes)
    self.prepare?(&message)
    return message
  }
}
