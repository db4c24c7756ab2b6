internal import Foundation
package import GRPCCore
internal import GRPCProtobuf
internal import NIOCore
internal import NIOHPACK
internal import RosterDomain
internal import RosterLocks
internal import RosterProto
internal import RosterServices
internal import RosterTransport
internal import SwiftProtobuf

/// The streaming methods over the Connect protocol (`application/connect+json`,
/// `application/connect+proto`) and gRPC-Web (`application/grpc-web`, `+proto`, `-text`), on
/// HTTP/1.1 and HTTP/2: server streams (`StreamEmployees`, `GetPicture`, `WatchChanges`),
/// client streams (`PutPicture`, `UpsertEmployees`, `ImportSales`) and bidirectional ones
/// (server reflection, over HTTP/2 only).
///
/// Each call enters the server's one `GRPCServer` through its `CallBridge`, with its `CallWire`
/// (JSON for `connect+json`, protobuf for the rest), so it gets what a gRPC call gets, through
/// the same router and interceptors. The request's envelopes are fed to the call as they
/// arrive (inflated when the handler reads them); each reply message is framed, written and
/// flushed on its own, and the handler's next write waits until it has gone (`ReplySink`). The
/// stream ends with Connect's end-of-stream message or gRPC-Web's trailers frame. Over Connect and
/// gRPC-Web, `WatchChanges` sends a heartbeat every 15 s of quiet unless its request asks for
/// another interval.
package struct ConnectStreams: Sendable {
  let methods: [String: StreamingMethod]
  /// Where the calls enter the server.
  let bridge: CallBridge
  let maxRequestBytes: Int
  let cors: CORSPolicy?
  /// The unary methods' paths, which a streaming content type does not suit (415, not 404).
  let unaryPaths: Set<String>

  package init(
    methods: [StreamingMethod],
    bridge: CallBridge,
    maxRequestBytes: Int,
    cors: CORSPolicy?,
    unaryPaths: Set<String>
  ) {
    self.unaryPaths = unaryPaths
    self.methods = Dictionary(
      methods.map { ("/" + $0.descriptor.fullyQualifiedMethod, $0) },
      uniquingKeysWith: { first, _ in first }
    )
    self.bridge = bridge
    self.maxRequestBytes = maxRequestBytes
    self.cors = cors
  }

  /// The wire protocol of a streamed request.
  enum WireProtocol: Sendable, Equatable {
    /// The Connect protocol's streams; messages in JSON or protobuf.
    case connect(json: Bool)
    /// gRPC-Web; the body in base64 with `text`.
    case grpcWeb(text: Bool)
  }

  /// What a request that is not gRPC over HTTP/2 is, read once from its content type and
  /// path: the one place its protocol is chosen.
  enum Route: Equatable {
    /// A streamed call: a Connect streaming content type, or gRPC-Web to a streaming method.
    case streamed(WireProtocol)
    /// A request read whole and answered by `ConnectUnary` (the Connect protocol's and
    /// gRPC-Web's unary calls, the console, CORS preflights), with its content type's media
    /// type (`ConnectUnary.mediaType`).
    case whole(mediaType: String)
  }

  /// The route of a request with `contentType` to `path`. Read from the content type and the
  /// path alone, so a unary request costs no more than that.
  func route(contentType: String?, path: String) -> Route {
    let mediaType = ConnectUnary.mediaType(contentType)
    switch mediaType {
    case "application/connect+json": return .streamed(.connect(json: true))
    case "application/connect+proto": return .streamed(.connect(json: false))
    default: ()
    }
    guard mediaType.hasPrefix("application/grpc-web"),
      self.methods[ConnectUnary.split(path).path] != nil
    else {
      return .whole(mediaType: mediaType)
    }
    return .streamed(.grpcWeb(text: mediaType.hasPrefix("application/grpc-web-text")))
  }

  enum Start {
    /// Answered at once (wrong method, path or content type; bidirectional over HTTP/1.1).
    case refused(PlainHTTPReply)
    /// Running: feed it the request's body, cancel it if the client goes.
    case started(StreamedCall)
  }

  /// Starts a streamed call for a request whose protocol is `wire`. `headers` are the request's
  /// in lower case, with `:method` and `:path` (as HTTP/2 sends them; the HTTP/1.1 side adds
  /// them); the reply goes to `sink`.
  func start(
    _ wire: WireProtocol,
    headers: HPACKHeaders,
    http1: Bool,
    peers: UnaryFastPath.Peers,
    sink: ReplySink
  ) -> Start {
    let corsHeaders = self.cors?.headers(for: headers.first(name: "origin")) ?? []
    func refuse(
      _ code: RPCError.Code,
      _ message: String,
      status: Int,
      allow: String? = nil
    ) -> Start {
      var reply = ConnectUnary.errorReply(
        code: code,
        message: message,
        status: status,
        metadata: corsHeaders
      )
      if let allow { reply.headers.append(("allow", allow)) }
      return .refused(reply)
    }
    let path = ConnectUnary.split(headers.first(name: ":path") ?? "").path
    guard headers.first(name: ":method") == "POST" else {
      return refuse(.unimplemented, "streaming calls are POST", status: 405, allow: "POST")
    }
    guard let method = self.methods[path] else {
      if self.unaryPaths.contains(path) {
        return refuse(
          .unimplemented,
          "\(path) is a unary method: use content-type application/json or application/proto",
          status: 415
        )
      }
      return refuse(
        .unimplemented,
        "no method \(path): methods are at /package.Service/Method, for example /roster.v1.Directory/StreamEmployees",
        status: 404
      )
    }
    if http1 && method.clientStreaming && method.serverStreaming {
      return refuse(
        .unimplemented,
        "\(path) is a bidirectional stream, which needs HTTP/2",
        status: 505
      )
    }
    let contentType = headers.first(name: "content-type") ?? ""
    let requestEncoding: MessageEncoding?
    let encodingHeader = wire.isConnect ? "connect-content-encoding" : "grpc-encoding"
    if let name = headers.first(name: encodingHeader), name != "identity" {
      guard let encoding = MessageEncoding(rawValue: name) else {
        return refuse(
          .unimplemented,
          "\(encodingHeader) \(name) is not served: use gzip, deflate or identity",
          status: 200
        )
      }
      requestEncoding = encoding
    } else {
      requestEncoding = nil
    }
    var metadata = ConnectUnary.callMetadata(headers)
    var deadline: ContinuousClock.Instant?
    if case .connect = wire, let timeout = headers.first(name: "connect-timeout-ms") {
      guard timeout.utf8.count <= 10, let milliseconds = Int(timeout), milliseconds >= 0 else {
        return refuse(
          .invalidArgument,
          "malformed connect-timeout-ms \(ClientText.quoted(timeout)): a whole number of milliseconds",
          status: 400
        )
      }
      metadata.replaceOrAdd(
        name: "grpc-timeout",
        value: ConnectUnary.grpcTimeout(milliseconds: milliseconds)
      )
      deadline = .now + .milliseconds(milliseconds)
    } else if case .grpcWeb = wire, let timeout = headers.first(name: "grpc-timeout") {
      metadata.replaceOrAdd(name: "grpc-timeout", value: timeout)
      deadline = CallControlInterceptor.timeout(timeout).map { .now + $0 }
    }
    let replyEncoding = ConnectUnary.replyEncoding(
      headers,
      accepting: wire.isConnect ? "connect-accept-encoding" : "grpc-accept-encoding",
      for: method.descriptor
    )

    let inbound = RequestEnvelopes(
      metadata: Metadata(metadata),
      encoding: requestEncoding,
      limit: self.maxRequestBytes
    )
    let writer = ReplyWriter(
      wire: wire,
      contentType: contentType,
      encoding: replyEncoding,
      extraHeaders: corsHeaders,
      deadline: deadline,
      sink: sink
    )
    let stream = RPCStream(
      descriptor: method.descriptor,
      inbound: RPCAsyncSequence<RPCRequestPart<BufferBytes>, any Error>(wrapping: inbound),
      outbound: RPCWriter<RPCResponsePart<BufferBytes>>.Closable(wrapping: writer)
    )
    guard let bridged = self.bridge.accept(stream, wire: wire.callWire, peers: peers) else {
      writer.end(Status(code: .unavailable, message: "the server is shutting down"), trailers: [:])
      return .started(StreamedCall(inbound: inbound, bridged: nil, text: wire.isText))
    }
    return .started(StreamedCall(inbound: inbound, bridged: bridged, text: wire.isText))
  }
}

extension ConnectStreams.WireProtocol {
  /// What the call's codec reads and writes: JSON for `connect+json`, protobuf for the rest.
  var callWire: CallWire {
    if case .connect(json: true) = self { return CallWire(format: .json, web: true) }
    return CallWire(format: .binary, web: true)
  }

  var isConnect: Bool {
    if case .connect = self { return true }
    return false
  }

  var isText: Bool {
    if case .grpcWeb(text: true) = self { return true }
    return false
  }
}

extension ConnectUnary {
  /// `connect-timeout-ms` as gRPC's `grpc-timeout` (at most 8 digits), which a call's deadline
  /// is read from.
  static func grpcTimeout(milliseconds: Int) -> String {
    milliseconds <= 99_999_999 ? "\(milliseconds)m" : "\(min(milliseconds / 1000, 99_999_999))S"
  }
}

/// Where a streamed call's reply goes: the HTTP side of one request, on either HTTP version.
/// Each closure may be called from any thread; the HTTP side keeps their order.
struct ReplySink: Sendable {
  /// Writes the reply's head: status 200 and `headers`.
  let head: @Sendable (_ headers: [(String, String)]) -> Void
  /// Writes one piece of the body and flushes it; returns once it has been written, and
  /// throws if the request has gone.
  let body: @Sendable (ByteBuffer) async throws -> Void
  /// Writes the body's last piece (possibly empty) and ends the reply.
  let end: @Sendable (ByteBuffer) -> Void
}

/// A running streamed call, as its HTTP side holds it: where the request's envelopes go, and
/// how to cancel it.
final class StreamedCall: Sendable {
  let inbound: RequestEnvelopes
  private let bridged: CallBridge.BridgedCall?
  private let reader: Locked<EnvelopeReader>

  init(inbound: RequestEnvelopes, bridged: CallBridge.BridgedCall?, text: Bool) {
    self.inbound = inbound
    self.bridged = bridged
    self.reader = Locked(EnvelopeReader(limit: inbound.limit, text: text))
  }

  /// Reads a piece of the request's body: its complete envelopes go to the call; a malformed
  /// envelope ends the request with the error.
  func receive(_ bytes: ByteBuffer) {
    do {
      let envelopes = try self.reader.withLock { try $0.append(bytes) }
      for envelope in envelopes { self.inbound.push(envelope) }
    } catch {
      self.inbound.finish(throwing: error)
    }
  }

  /// The request's body has ended.
  func endOfRequest() {
    if self.reader.withLock({ $0.isEmpty }) {
      self.inbound.finish()
    } else {
      self.inbound.finish(
        throwing: RPCError(code: .invalidArgument, message: "the request ends inside a message")
      )
    }
  }

  /// The client went away: the call is cancelled.
  func cancel() {
    self.inbound.finish(throwing: RPCError(code: .cancelled, message: "the client went away"))
    self.bridged?.cancel()
  }
}
