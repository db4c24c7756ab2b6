internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import RosterDomain
internal import RosterTransport

// How a Connect request's message is written: compressed bodies, the encodings a client
// accepts, and a GET's message in its query.
extension ConnectUnary {
  /// A body in `compression` (`gzip` or `deflate`) inflated, within `limit` bytes.
  static func inflate(
    _ body: ByteBuffer,
    _ compression: String,
    limit: Int
  ) -> Result<ByteBuffer, Refusal> {
    guard let encoding = MessageEncoding(rawValue: compression) else {
      return .failure(
        Refusal(
          .unimplemented,
          "compression \(compression) is not served: use gzip, deflate or identity"
        )
      )
    }
    do {
      return .success(try encoding.decompress(body, limit: limit, allocator: ByteBufferAllocator()))
    } catch let error as RPCError {
      return .failure(Refusal(error.code, error.message))
    } catch {
      return .failure(Refusal(.invalidArgument, "the body is not valid \(compression) data"))
    }
  }

  /// The encoding to compress a reply of `size` bytes with: gzip or deflate when the client
  /// accepts it (`accept-encoding`, or Connect's own header) and the reply is large enough
  /// to gain from it.
  static func responseEncoding(_ headers: HPACKHeaders, size: Int) -> MessageEncoding? {
    guard size >= MessageEncoding.minimumResponseBytes else { return nil }
    let accepted =
      (headers[canonicalForm: "accept-encoding"] + headers[canonicalForm: "connect-accept-encoding"])
      .map { Self.mediaType($0) }
    if accepted.contains("gzip") { return .gzip }
    if accepted.contains("deflate") { return .deflate }
    return nil
  }

  /// A GET's message from its query: `encoding` (json or proto), `message` (percent-encoded,
  /// or base64url with `base64=1`), `compression` (gzip, deflate or identity).
  static func getMessage(_ query: Substring) -> Result<(Encoding, [UInt8], String?), Refusal> {
    var fields: [String: String] = [:]
    for pair in query.split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
      let raw = parts.count > 1 ? String(parts[1]).replacingOccurrences(of: "+", with: " ") : ""
      guard let value = raw.removingPercentEncoding else {
        return .failure(
          Refusal(
            .invalidArgument,
            "query parameter \(ClientText.quoted(name)) is not valid percent-encoding"
          )
        )
      }
      fields[name] = value
    }
    let encoding: Encoding
    switch fields["encoding"] {
    case "json": encoding = .json
    case "proto": encoding = .proto
    case let other:
      return .failure(
        Refusal(
          .invalidArgument,
          "query parameter encoding must be json or proto, not \(other.map(ClientText.quoted) ?? "missing")"
        )
      )
    }
    let compression = fields["compression"].flatMap { $0 == "identity" ? nil : $0 }
    let text = fields["message"] ?? ""
    guard fields["base64"] == "1" else {
      return .success((encoding, Array(text.utf8), compression))
    }
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(
      of: "_",
      with: "/"
    )
    standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
    guard let bytes = Data(base64Encoded: standard).map(Array.init) else {
      return .failure(Refusal(.invalidArgument, "query parameter message is not valid base64url"))
    }
    return .success((encoding, bytes, compression))
  }

  /// The encoding for a call's reply messages: the first in the request's `header` (gRPC-Web's
  /// or Connect's accept-encoding) that the server has, unless the method sends pictures.
  static func replyEncoding(
    _ headers: HPACKHeaders,
    accepting header: String,
    for method: MethodDescriptor
  )
    -> MessageEncoding?
  {
    guard !MessageEncoding.incompressibleServices.contains(method.service.fullyQualifiedService)
    else { return nil }
    return headers[canonicalForm: header].lazy.compactMap { MessageEncoding(rawValue: String($0)) }
      .first
  }
}
