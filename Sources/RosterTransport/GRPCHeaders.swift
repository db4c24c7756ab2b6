internal import Foundation
package import GRPCCore
package import NIOCore
package import NIOHPACK

// gRPC over HTTP/2 as both of Roster's paths write it (the stream codec here, the unary fast
// path in RosterServer): request metadata from headers, response headers and trailers,
// message framing, and peers as grpc-swift names them.

/// A peer as grpc-swift names it in `ServerContext` (`ipv4:127.0.0.1:5000`).
package func describePeer(_ address: SocketAddress?) -> String {
  switch address {
  case .v4(let ipv4)?: return "ipv4:\(ipv4.host):\(address?.port ?? 0)"
  case .v6(let ipv6)?: return "ipv6:[\(ipv6.host)]:\(address?.port ?? 0)"
  case .unixDomainSocket?: return "unix:\(address?.pathname ?? "<unknown>")"
  case nil: return "<unknown>"
  }
}

extension Metadata {
  /// Request metadata from HTTP/2 headers, as grpc-swift's transport makes it: every header,
  /// `-bin` values base64-decoded.
  package init(_ headers: HPACKHeaders) {
    self.init()
    self.reserveCapacity(headers.count)
    for (name, value, _) in headers {
      // The last byte first: `hasSuffix` compares by Character, a cost on every header.
      if name.utf8.last == UInt8(ascii: "n"), name.hasSuffix("-bin"),
        let bytes = Data(base64Encoded: Self.padded(value))
      {
        self.addBinary(Array(bytes), forKey: name)
      } else {
        self.addString(value, forKey: name)
      }
    }
  }

  private static func padded(_ base64: String) -> String {
    let remainder = base64.utf8.count % 4
    return remainder == 0 ? base64 : base64 + String(repeating: "=", count: 4 - remainder)
  }
}

extension ByteBufferAllocator {
  /// `message` with gRPC's 5-byte prefix: not compressed, and its length.
  package func grpcMessage(_ message: ByteBuffer) -> ByteBuffer {
    var framed = self.buffer(capacity: 5 + message.readableBytes)
    framed.writeInteger(UInt8(0))
    framed.writeInteger(UInt32(message.readableBytes))
    framed.writeImmutableBuffer(message)
    return framed
  }
}

extension HPACKHeaders {
  /// A gRPC response's headers: `:status`, `content-type`, then `metadata`.
  package init(response metadata: Metadata) {
    if metadata.isEmpty {
      self = Self.plainResponse
      return
    }
    self.init()
    self.reserveCapacity(2 + metadata.count)
    self.add(name: ":status", value: "200")
    self.add(name: "content-type", value: "application/grpc")
    self.add(metadata)
  }

  /// The headers and trailers most calls end with, made once: `HPACKHeaders.add` checks each
  /// name it is given, byte by byte.
  private static let plainResponse: HPACKHeaders = [
    ":status": "200", "content-type": "application/grpc",
  ]
  private static let okTrailers: HPACKHeaders = ["grpc-status": "0"]

  /// Custom metadata as headers: names lower-cased, binary values base64-encoded.
  package mutating func add(_ metadata: Metadata) {
    for (key, value) in metadata {
      switch value {
      case .string(let text): self.add(name: key.lowercased(), value: text)
      case .binary(let bytes):
        self.add(name: key.lowercased(), value: Data(bytes).base64EncodedString())
      }
    }
  }

  /// gRPC trailers: `grpc-status`, a percent-encoded `grpc-message`, the metadata; with
  /// `:status` and `content-type` first for a trailers-only reply.
  package init(status: Status, metadata: Metadata, trailersOnly: Bool) {
    if status.code == .ok, status.message.isEmpty, metadata.isEmpty, !trailersOnly {
      self = Self.okTrailers
      return
    }
    self.init()
    self.reserveCapacity(4 + metadata.count)
    if trailersOnly {
      self.add(name: ":status", value: "200")
      self.add(name: "content-type", value: "application/grpc")
    }
    self.add(name: "grpc-status", value: String(status.code.rawValue))
    if !status.message.isEmpty {
      self.add(name: "grpc-message", value: Self.percentEncoded(status.message))
    }
    self.add(metadata)
  }

  /// gRPC's `grpc-message` encoding: bytes outside printable ASCII, and `%`, as `%XX`.
  private static func percentEncoded(_ message: String) -> String {
    let bytes = message.utf8
    if bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "%") }) { return message }
    var encoded = ""
    encoded.reserveCapacity(bytes.count * 3)
    for byte in bytes {
      if byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%") {
        encoded.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        encoded += String(format: "%%%02X", byte)
      }
    }
    return encoded
  }
}
