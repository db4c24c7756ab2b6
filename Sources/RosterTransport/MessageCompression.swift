internal import CompressNIO
internal import GRPCCore
package import NIOCore
internal import NIOHPACK

/// gRPC message compression (`grpc-encoding`), through zlib (compress-nio): `gzip`, and
/// `deflate` (gRPC's name for a zlib stream, as grpc-go and grpc-java read it).
///
/// Requests: a compressed message is inflated into a buffer that may grow to the request size
/// limit and no further, so a small message that would inflate past it (a zip bomb) costs at
/// most the limit in memory and is refused with `RESOURCE_EXHAUSTED`.
///
/// Responses are compressed only when it pays and the client asked for it: the request itself
/// came compressed with an encoding the client also lists in `grpc-accept-encoding` (grpc-go's
/// rule: answer in the request's encoding), the message is at least `minimumResponseBytes`,
/// and the method does not send picture bytes (JPEG does not shrink).
package enum MessageEncoding: String, Sendable {
  case gzip
  case deflate

  /// What the server accepts, for `grpc-accept-encoding`.
  static let acceptHeader = "gzip,deflate,identity"

  /// Responses below this size go uncompressed: the gzip header alone is 18 bytes, and small
  /// protobuf messages hardly shrink.
  package static let minimumResponseBytes = 1024

  /// Methods whose replies are already-compressed bytes (pictures).
  package static let incompressibleServices: Set<String> = ["roster.v1.Pictures"]

  /// The request's encoding: nil for none or `identity`; `.failure` for one the server does not
  /// support (its name).
  static func of(request headers: HPACKHeaders) -> Result<MessageEncoding?, UnsupportedEncoding> {
    guard let name = headers.first(name: "grpc-encoding"), name != "identity" else {
      return .success(nil)
    }
    guard let encoding = MessageEncoding(rawValue: name) else {
      return .failure(UnsupportedEncoding(name: name))
    }
    return .success(encoding)
  }

  struct UnsupportedEncoding: Error {
    var name: String
  }

  /// The encoding to compress a call's responses with, by the rule above; nil for none.
  static func forResponses(
    request headers: HPACKHeaders,
    requestEncoding: MessageEncoding?,
    service: String
  ) -> MessageEncoding? {
    guard let requestEncoding, !Self.incompressibleServices.contains(service) else { return nil }
    let accepted = headers[canonicalForm: "grpc-accept-encoding"]
    return accepted.contains(where: { $0 == Substring(requestEncoding.rawValue) })
      ? requestEncoding : nil
  }

  private var algorithm: CompressNIO.CompressionAlgorithm {
    switch self {
    case .gzip: .gzip()
    case .deflate: .zlib()
    }
  }

  /// `message` inflated; `RESOURCE_EXHAUSTED` when it would exceed `limit` bytes,
  /// `INTERNAL` when it is not valid compressed data.
  package func decompress(
    _ message: ByteBuffer,
    limit: Int,
    allocator: ByteBufferAllocator
  ) throws -> ByteBuffer {
    var input = message
    do {
      return try input.decompress(with: self.algorithm, maxSize: limit, allocator: allocator)
    } catch let error as CompressNIOError where error == .bufferOverflow {
      throw RPCError(
        code: .resourceExhausted,
        message: "the \(self.rawValue)-compressed message inflates past the limit of \(limit) bytes"
      )
    } catch {
      throw RPCError(
        code: .internalError,
        message: "the message is not valid \(self.rawValue) data"
      )
    }
  }

  /// `message` compressed.
  package func compress(_ message: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer? {
    var input = message
    return try? input.compress(with: self.algorithm, allocator: allocator)
  }
}

extension ByteBufferAllocator {
  /// `message` with gRPC's 5-byte prefix, compressed with `encoding` when it is given and the
  /// message is large enough to gain from it.
  package func grpcMessage(_ message: ByteBuffer, encoding: MessageEncoding?) -> ByteBuffer {
    guard let encoding, message.readableBytes >= MessageEncoding.minimumResponseBytes,
      let compressed = encoding.compress(message, allocator: self)
    else { return self.grpcMessage(message) }
    var framed = self.buffer(capacity: 5 + compressed.readableBytes)
    framed.writeInteger(UInt8(1))
    framed.writeInteger(UInt32(compressed.readableBytes))
    framed.writeImmutableBuffer(compressed)
    return framed
  }
}
