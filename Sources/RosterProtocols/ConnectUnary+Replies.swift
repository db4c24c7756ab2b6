internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import RosterTransport

// The Connect protocol's replies: statuses, error bodies, ETags and compression.
extension ConnectUnary {
  static func reply(
    _ outcome: UnaryOutcome,
    encoding: Encoding,
    etag wantsETag: Bool,
    ifNoneMatch: String?,
    accepting: HPACKHeaders = HPACKHeaders()
  ) -> PlainHTTPReply {
    var metadata = HPACKHeaders()
    if let headers = outcome.headers { metadata.add(headers) }
    var trailers = HPACKHeaders()
    trailers.add(outcome.trailers)
    for (name, value, _) in trailers { metadata.add(name: "trailer-" + name, value: value) }
    let pairs = metadata.map { ($0.name, $0.value) }
    guard outcome.status.code == .ok else {
      return Self.errorReply(
        code: RPCError.Code(outcome.status.code) ?? .unknown,
        message: outcome.status.message,
        status: nil,
        metadata: pairs,
        details: JSONMessages.connectDetails(outcome.trailers)
      )
    }
    let body = outcome.messages.first ?? ByteBuffer()
    var headers = [("content-type", encoding.contentType)] + pairs
    if wantsETag {
      let etag = "\"\(Self.fingerprint(body))\""
      headers.append(("etag", etag))
      if let ifNoneMatch,
        ifNoneMatch.split(separator: ",").contains(where: {
          $0.trimmingCharacters(in: .whitespaces) == etag || $0 == "*"
        })
      {
        return PlainHTTPReply(
          status: 304,
          headers: headers.filter { $0.0 != "content-type" },
          body: ByteBuffer()
        )
      }
    }
    if let compression = Self.responseEncoding(accepting, size: body.readableBytes),
      let compressed = compression.compress(body, allocator: ByteBufferAllocator())
    {
      headers.append(("content-encoding", compression.rawValue))
      headers.append(("vary", "Accept-Encoding"))
      return PlainHTTPReply(status: 200, headers: headers, body: compressed)
    }
    return PlainHTTPReply(status: 200, headers: headers, body: body)
  }

  /// A Connect error: the HTTP status for its code (unless `status` says otherwise), and
  /// `{"code": …, "message": …, "details": […]}` (details only when there are some).
  static func errorReply(
    code: RPCError.Code,
    message: String,
    status: Int?,
    metadata: [(String, String)],
    details: [[String: String]] = []
  ) -> PlainHTTPReply {
    let (name, httpStatus) = Self.connectCode(code)
    struct Body: Encodable {
      var code: String
      var message: String
      var details: [[String: String]]?
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let body = Body(code: name, message: message, details: details.isEmpty ? nil : details)
    let json = (try? encoder.encode(body)) ?? Data("{}".utf8)
    return PlainHTTPReply(
      status: status ?? httpStatus,
      headers: [("content-type", "application/json")] + metadata,
      body: ByteBuffer(bytes: json)
    )
  }

  /// The Connect protocol's name and HTTP status for a gRPC code.
  static func connectCode(_ code: RPCError.Code) -> (String, Int) {
    switch code {
    case .cancelled: ("canceled", 499)
    case .unknown: ("unknown", 500)
    case .invalidArgument: ("invalid_argument", 400)
    case .deadlineExceeded: ("deadline_exceeded", 504)
    case .notFound: ("not_found", 404)
    case .alreadyExists: ("already_exists", 409)
    case .permissionDenied: ("permission_denied", 403)
    case .resourceExhausted: ("resource_exhausted", 429)
    case .failedPrecondition: ("failed_precondition", 400)
    case .aborted: ("aborted", 409)
    case .outOfRange: ("out_of_range", 400)
    case .unimplemented: ("unimplemented", 501)
    case .internalError: ("internal", 500)
    case .unavailable: ("unavailable", 503)
    case .dataLoss: ("data_loss", 500)
    case .unauthenticated: ("unauthenticated", 401)
    default: ("unknown", 500)
    }
  }

  /// A stable fingerprint of a reply's bytes, for its `ETag` (FNV-1a, 64 bits): the same
  /// reply gives the same tag in every process.
  static func fingerprint(_ body: ByteBuffer) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in body.readableBytesView {
      hash ^= UInt64(byte)
      hash = hash &* 0x0000_0100_0000_01B3
    }
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
  }
}
