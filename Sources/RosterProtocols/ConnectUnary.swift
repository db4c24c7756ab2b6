internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import RosterDomain
internal import RosterProto
package import RosterServices
internal import RosterTransport
internal import SwiftProtobuf

/// An HTTP request that is not gRPC, whichever HTTP version carried it: header names in
/// lower case, the body whole.
struct PlainHTTPRequest: Sendable {
  /// Whether it came over HTTP/1.1 (else HTTP/2).
  var http1: Bool
  var method: String
  /// The path and the query, as sent.
  var target: String
  var headers: HPACKHeaders
  /// The content type's media type, as the request's route read it (`ConnectStreams.route`).
  var mediaType: String
  var body: ByteBuffer
}

/// The answer to a `PlainHTTPRequest`.
struct PlainHTTPReply: Sendable {
  var status: Int
  /// Without `content-length`, which the HTTP side adds.
  var headers: [(String, String)]
  var body: ByteBuffer
}

/// The Connect protocol's unary calls (connectrpc.com/docs/protocol) on the unary methods of
/// `UnaryFastPath`: `POST` with `application/json` (the proto3 JSON mapping) or
/// `application/proto`, and `GET` for the methods marked `idempotency_level =
/// NO_SIDE_EFFECTS` (the message in the query, the reply with an `ETag`; `If-None-Match`
/// gets 304). Each call runs as a gRPC call does on the fast path: the same interceptors
/// (tokens in `authorization`, roles, author metadata, admission, limits, logs and metrics),
/// a deadline from `connect-timeout-ms`, cancelled when its HTTP request goes away. Errors
/// come back with the Connect status for their code and `{"code", "message"}` in JSON;
/// response metadata as headers, trailers as `trailer-` headers.
///
/// gRPC-Web's unary calls are served here too (`serveGRPCWeb`); streaming methods, over
/// either protocol, by `ConnectStreams`.
package struct ConnectUnary: Sendable {
  let fastPath: UnaryFastPath
  /// The paths of the methods that read and change nothing, which `GET` may call.
  let readOnlyPaths: Set<String>
  /// The paths of the streaming methods, which `ConnectStreams` serves.
  let streamingPaths: Set<String>
  /// The paths of the bidirectional ones, which HTTP/1.1 cannot carry.
  let bidirectionalPaths: Set<String>

  /// The browsers' origins that may call; nil for none (no CORS headers at all).
  let cors: CORSPolicy?
  /// The web console, served at `/`; nil when it is turned off.
  let console: WebConsole?

  package init(
    fastPath: UnaryFastPath,
    cors: CORSPolicy? = nil,
    console: WebConsole? = nil,
    policies: MethodPolicies = .server
  ) {
    self.fastPath = fastPath
    self.cors = cors
    self.console = console
    self.readOnlyPaths = policies.paths { _, policy in policy.readOnly }
    self.streamingPaths = policies.paths { _, policy in policy.streams }
    self.bidirectionalPaths = policies.paths { method, _ in method.type == .bidirectionalStreaming }
  }

  /// Starts serving `request`; `reply` gets the answer once, on `eventLoop`. Returns the
  /// running call, to cancel when the client goes away; nil when the answer was given at once.
  func serve(
    _ request: PlainHTTPRequest,
    peers: UnaryFastPath.Peers,
    eventLoop: any EventLoop,
    executor: EventLoopGroupExecutor,
    reply: @escaping @Sendable (PlainHTTPReply) -> Void
  ) -> UnaryFastPath.LaunchedCall? {
    let origin = request.headers.first(name: "origin")
    if let cors = self.cors, request.method == "OPTIONS",
      request.headers.first(name: "access-control-request-method") != nil
    {
      reply(cors.preflight(origin: origin))
      return nil
    }
    if let page = self.console?.reply(to: request) {
      reply(page)
      return nil
    }
    let corsHeaders = self.cors?.headers(for: origin) ?? []
    let respond: @Sendable (PlainHTTPReply) -> Void
    if corsHeaders.isEmpty {
      respond = reply
    } else {
      respond = { answer in
        var withCORS = answer
        withCORS.headers += corsHeaders
        reply(withCORS)
      }
    }
    let contentType = request.mediaType
    if contentType.hasPrefix("application/grpc-web") {
      return self.serveGRPCWeb(
        request,
        contentType: contentType,
        peers: peers,
        eventLoop: eventLoop,
        executor: executor,
        respond: respond
      )
    }
    let call: Call
    switch self.parse(request, contentType: contentType) {
    case .success(let parsed): call = parsed
    case .failure(let refusal):
      respond(refusal.reply)
      return nil
    }
    let coding = call.encoding
    let etagWanted = call.isGet
    let acceptHeaders = request.headers
    let deadline = call.deadline
    let ifNoneMatch = request.headers.first(name: "if-none-match")
    return self.fastPath.start(
      call.method,
      headers: call.metadata,
      timeout: call.metadata.first(name: "grpc-timeout"),
      message: call.message,
      peers: peers,
      format: call.encoding == .json ? .json : .binary,
      eventLoop: eventLoop,
      executor: executor
    ) { outcome in
      var outcome = outcome
      if outcome.status.code == .cancelled, let deadline, ContinuousClock.now >= deadline {
        // The call's timeout stopped it: the Connect protocol says deadline_exceeded.
        outcome.status = Status(
          code: .deadlineExceeded,
          message: "the call's deadline (connect-timeout-ms) passed"
        )
      }
      respond(
        Self.reply(
          outcome,
          encoding: coding,
          etag: etagWanted,
          ifNoneMatch: ifNoneMatch,
          accepting: acceptHeaders
        )
      )
    }
  }

  // MARK: - Requests

  enum Encoding: Sendable {
    case json
    case proto

    var contentType: String {
      switch self {
      case .json: "application/json"
      case .proto: "application/proto"
      }
    }
  }

  struct Call {
    var method: UnaryFastPath.Method
    var encoding: Encoding
    var message: ByteBuffer?
    var metadata: HPACKHeaders
    var isGet: Bool
    /// When `connect-timeout-ms` runs out, if the request set one.
    var deadline: ContinuousClock.Instant? = nil
  }

  /// Why a request was answered before it ran.
  struct Refusal: Error {
    var reply: PlainHTTPReply

    init(
      _ code: RPCError.Code,
      _ message: String,
      status: Int? = nil,
      headers: [(String, String)] = []
    ) {
      self.reply = ConnectUnary.errorReply(
        code: code,
        message: message,
        status: status,
        metadata: []
      )
      self.reply.headers += headers
    }
  }

  /// The headers that describe the HTTP exchange, not the call: never call metadata.
  static let protocolHeaders: Set<String> = [
    "content-type", "content-length", "content-encoding", "accept-encoding", "connection",
    "keep-alive",
    "host", "te", "transfer-encoding", "upgrade", "proxy-connection", "connect-protocol-version",
    "connect-timeout-ms", "connect-content-encoding", "connect-accept-encoding", "if-none-match",
    "x-grpc-web",
  ]

  /// A request's headers as its call's metadata: all but the pseudo-headers and those of the
  /// HTTP exchange (`protocolHeaders`).
  static func callMetadata(_ headers: HPACKHeaders) -> HPACKHeaders {
    var metadata = HPACKHeaders()
    for (name, value, _) in headers
    where name.utf8.first != UInt8(ascii: ":") && !Self.protocolHeaders.contains(name) {
      metadata.add(name: name, value: value)
    }
    return metadata
  }

  /// A header's value without its parameters (`; charset=utf-8`) or the spaces and tabs
  /// around it (RFC 9110's OWS), its ASCII letters in lower case. Byte by byte: Foundation's
  /// trimming and Unicode case mapping cost a Connect call more than its JSON.
  static func mediaType(_ value: some StringProtocol) -> String {
    let utf8 = Substring(value).utf8
    var start = utf8.startIndex
    var end = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.endIndex
    func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    while start < end, isSpace(utf8[start]) { utf8.formIndex(after: &start) }
    while start < end {
      let last = utf8.index(before: end)
      guard isSpace(utf8[last]) else { break }
      end = last
    }
    let count = utf8.distance(from: start, to: end)
    return String(unsafeUninitializedCapacity: count) { buffer in
      var written = 0
      for byte in utf8[start ..< end] {
        buffer[written] =
          (UInt8(ascii: "A") ... UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
        written += 1
      }
      return written
    }
  }

  static func mediaType(_ value: String?) -> String {
    value.map { Self.mediaType($0) } ?? ""
  }

  /// `request`, whose content type without parameters is `contentType`, as a unary call.
  func parse(_ request: PlainHTTPRequest, contentType: String) -> Result<Call, Refusal> {
    let (path, query) = Self.split(request.target)
    guard let method = self.fastPath.methods[path] else {
      if request.http1 && self.bidirectionalPaths.contains(path) {
        // As connect-go answers: HTTP/1.1 cannot carry a request and a reply at once.
        return .failure(
          Refusal(
            .unimplemented,
            "\(path) is a bidirectional stream, which needs HTTP/2",
            status: 505
          )
        )
      }
      if self.streamingPaths.contains(path) {
        return .failure(
          Refusal(
            .unimplemented,
            "\(path) is a streaming method: use content-type application/connect+json or application/connect+proto",
            status: 415
          )
        )
      }
      return .failure(
        Refusal(
          .unimplemented,
          "no method \(path): methods are at /package.Service/Method, for example /roster.v1.Directory/GetEmployee",
          status: 404
        )
      )
    }
    let encoding: Encoding
    var body: ByteBuffer
    let isGet: Bool
    switch request.method {
    case "POST":
      isGet = false
      switch contentType {
      case "application/json": encoding = .json
      case "application/proto": encoding = .proto
      default:
        return .failure(
          Refusal(
            .unimplemented,
            "content-type \(ClientText.quoted(contentType)) is not served: use application/json or application/proto (Connect), or application/grpc",
            status: 415
          )
        )
      }
      body = request.body
      if let compression = request.headers.first(name: "content-encoding"),
        compression != "identity"
      {
        switch Self.inflate(body, compression, limit: self.fastPath.maxRequestBytes) {
        case .success(let inflated): body = inflated
        case .failure(let refusal): return .failure(refusal)
        }
      }
    case "GET":
      isGet = true
      guard self.readOnlyPaths.contains(path) else {
        return .failure(
          Refusal(
            .unimplemented,
            "\(path) has side effects: call it with POST",
            status: 405,
            headers: [("allow", "POST")]
          )
        )
      }
      switch Self.getMessage(query) {
      case .success(let (queryEncoding, message, compression)):
        encoding = queryEncoding
        body = ByteBuffer(bytes: message)
        if let compression {
          switch Self.inflate(body, compression, limit: self.fastPath.maxRequestBytes) {
          case .success(let inflated): body = inflated
          case .failure(let refusal): return .failure(refusal)
          }
        }
      case .failure(let refusal):
        return .failure(refusal)
      }
    default:
      return .failure(
        Refusal(
          .unimplemented,
          "HTTP method \(request.method) is not served: use POST\(self.readOnlyPaths.contains(path) ? " or GET" : "")",
          status: 405,
          headers: [("allow", self.readOnlyPaths.contains(path) ? "GET, POST" : "POST")]
        )
      )
    }
    guard body.readableBytes <= self.fastPath.maxRequestBytes else {
      return .failure(
        Refusal(
          .resourceExhausted,
          "the request of \(body.readableBytes) bytes is over the limit of \(self.fastPath.maxRequestBytes)"
        )
      )
    }
    var metadata = Self.callMetadata(request.headers)
    var deadline: ContinuousClock.Instant?
    if let timeout = request.headers.first(name: "connect-timeout-ms") {
      guard timeout.utf8.count <= 10, let milliseconds = Int(timeout), milliseconds >= 0 else {
        return .failure(
          Refusal(
            .invalidArgument,
            "malformed connect-timeout-ms \(ClientText.quoted(timeout)): a whole number of milliseconds"
          )
        )
      }
      // As gRPC's header, which the call's deadline is read from (at most 8 digits).
      metadata.replaceOrAdd(
        name: "grpc-timeout",
        value: Self.grpcTimeout(milliseconds: milliseconds)
      )
      deadline = .now + .milliseconds(milliseconds)
    }
    if encoding == .json && body.readableBytes == 0 { body = ByteBuffer(string: "{}") }
    return .success(
      Call(
        method: method,
        encoding: encoding,
        message: body,
        metadata: metadata,
        isGet: isGet,
        deadline: deadline
      )
    )
  }

  static func split(_ target: String) -> (path: String, query: Substring) {
    // By its UTF-8 bytes: a search by Character walks grapheme clusters, which cost a Connect
    // call more than decoding its request's JSON did.
    guard let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return (target, "") }
    return (String(target[..<mark]), target[target.index(after: mark)...])
  }
}
