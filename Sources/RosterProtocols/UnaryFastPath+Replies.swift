internal import GRPCCore
internal import GRPCProtobuf
package import NIOCore
package import RosterServices
internal import RosterTransport
internal import SwiftProtobuf

extension UnaryFastPath {
  /// A direct reply in the call's wire format: the binary form written from what the store read.
  package static func serialize<Output: DirectReply>(
    direct reply: Output,
    format: WireFormat
  ) throws -> ByteBuffer {
    switch format {
    case .binary:
      let bytes = reply.binary()
      // Debug builds (every test) check each reply against SwiftProtobuf's bytes.
      assert(
        bytes == (try? reply.message.serializedBytes() as [UInt8]),
        "EmployeeWire differs from SwiftProtobuf"
      )
      return ByteBuffer(bytes: bytes)
    case .json:
      let bytes = reply.json()
      // Debug builds (every test) check each reply against SwiftProtobuf's reading of it.
      assert(
        (try? Output.Message(jsonUTF8Bytes: bytes))?.isEqualTo(message: reply.message) == true,
        "EmployeeJSON differs from SwiftProtobuf"
      )
      return ByteBuffer(bytes: bytes)
    }
  }

  /// One response message in the call's wire format.
  static func serialize<Output: SwiftProtobuf.Message>(
    _ message: Output,
    format: WireFormat
  ) throws -> ByteBuffer {
    switch format {
    case .binary:
      let bytes: BufferBytes = try ProtobufSerializer<Output>().serialize(message)
      return bytes.buffer
    case .json:
      var options = JSONEncodingOptions()
      options.useDeterministicOrdering = true
      return ByteBuffer(bytes: try message.jsonUTF8Bytes(options: options) as [UInt8])
    }
  }
}

/// How a unary call ended: the response's metadata (nil when it was refused before a response
/// began: a trailers-only reply), its messages, the status and the trailing metadata.
struct UnaryOutcome: Sendable {
  var headers: Metadata?
  var messages: [ByteBuffer]
  var status: Status
  var trailers: Metadata

  /// A call refused before a response began: trailers only.
  static func refused(_ error: RPCError) -> UnaryOutcome {
    UnaryOutcome(headers: nil, messages: [], status: Status(error), trailers: error.metadata)
  }
}

/// A status with the code and message of `error`.
extension Status {
  init(_ error: RPCError) {
    self.init(code: Status.Code(error.code), message: error.message)
  }
}
