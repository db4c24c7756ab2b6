internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import RosterTransport

extension ConnectUnary {
  /// gRPC-Web's unary calls (`application/grpc-web`, `+proto`, and the base64
  /// `application/grpc-web-text` of older grpc-web JavaScript clients): the request is one
  /// length-prefixed message; the reply is 200 with the message, then the trailers in a final
  /// frame (flag 0x80), or, for a call refused before it began, the status in the headers
  /// alone (trailers-only).
  func serveGRPCWeb(
    _ request: PlainHTTPRequest,
    contentType: String,
    peers: UnaryFastPath.Peers,
    eventLoop: any EventLoop,
    executor: EventLoopGroupExecutor,
    respond: @escaping @Sendable (PlainHTTPReply) -> Void
  ) -> UnaryFastPath.LaunchedCall? {
    let text = contentType.hasPrefix("application/grpc-web-text")
    let (path, _) = Self.split(request.target)
    guard request.method == "POST" else {
      respond(
        Refusal(
          .unimplemented,
          "gRPC-Web calls are POST",
          status: 405,
          headers: [("allow", "POST")]
        ).reply
      )
      return nil
    }
    func refuse(_ code: RPCError.Code, _ message: String) -> UnaryFastPath.LaunchedCall? {
      let status = Status(code: Status.Code(code), message: message)
      let outcome = UnaryOutcome(headers: nil, messages: [], status: status, trailers: [:])
      respond(Self.grpcWebReply(outcome, contentType: contentType, text: text))
      return nil
    }
    guard let method = self.fastPath.methods[path] else {
      if self.streamingPaths.contains(path) {
        return refuse(
          .unimplemented,
          "\(path) is a streaming method: gRPC-Web streaming is not served yet"
        )
      }
      return refuse(.unimplemented, "no method \(path)")
    }
    var body = request.body
    if text {
      let encoded = String(decoding: body.readableBytesView, as: UTF8.self).filter {
        !$0.isWhitespace
      }
      guard let decoded = Data(base64Encoded: encoded) else {
        return refuse(.invalidArgument, "the grpc-web-text body is not valid base64")
      }
      body = ByteBuffer(bytes: decoded)
    }
    let compressed = body.getInteger(at: body.readerIndex, as: UInt8.self) == 1
    if compressed {
      // As `singleMessage` reads it, the flag cleared; inflated below.
      body.setInteger(UInt8(0), at: body.readerIndex)
    }
    if let length = body.getInteger(at: body.readerIndex + 1, as: UInt32.self),
      Int(length) > self.fastPath.maxRequestBytes
    {
      return refuse(
        .resourceExhausted,
        "the message of \(length) bytes is over the limit of \(self.fastPath.maxRequestBytes)"
      )
    }
    guard var message = UnaryFastPath.singleMessage(in: body, limit: self.fastPath.maxRequestBytes)
    else {
      return refuse(
        .internalError,
        "a gRPC-Web unary request is exactly one length-prefixed message"
      )
    }
    if compressed {
      guard let name = request.headers.first(name: "grpc-encoding"), name != "identity" else {
        return refuse(
          .internalError,
          "a message is marked compressed but the request has no grpc-encoding"
        )
      }
      guard let encoding = MessageEncoding(rawValue: name) else {
        return refuse(
          .unimplemented,
          "grpc-encoding \(name) is not served: use gzip, deflate or identity"
        )
      }
      do {
        message = try encoding.decompress(
          message,
          limit: self.fastPath.maxRequestBytes,
          allocator: ByteBufferAllocator()
        )
      } catch let error as RPCError {
        return refuse(error.code, error.message)
      } catch {
        return refuse(.internalError, "the message is not valid \(name) data")
      }
    }
    let replyEncoding = Self.replyEncoding(
      request.headers,
      accepting: "grpc-accept-encoding",
      for: method.descriptor
    )
    let metadata = Self.callMetadata(request.headers)
    return self.fastPath.start(
      method,
      headers: metadata,
      timeout: metadata.first(name: "grpc-timeout"),
      message: message,
      peers: peers,
      format: .binary,
      eventLoop: eventLoop,
      executor: executor
    ) { outcome in
      respond(
        Self.grpcWebReply(outcome, contentType: contentType, text: text, encoding: replyEncoding)
      )
    }
  }

  /// The reply: its message compressed with `encoding` when it is large enough to gain.
  static func grpcWebReply(
    _ outcome: UnaryOutcome,
    contentType: String,
    text: Bool,
    encoding: MessageEncoding? = nil
  ) -> PlainHTTPReply {
    let trailers = HPACKHeaders(
      status: outcome.status,
      metadata: outcome.trailers,
      trailersOnly: false
    )
    guard let metadata = outcome.headers else {
      // Trailers-only: the status in the headers, no body.
      return PlainHTTPReply(
        status: 200,
        headers: [("content-type", contentType)] + trailers.map { ($0.name, $0.value) },
        body: ByteBuffer()
      )
    }
    var headers = HPACKHeaders()
    if let encoding { headers.add(name: "grpc-encoding", value: encoding.rawValue) }
    headers.add(metadata)
    var body = ByteBuffer()
    for message in outcome.messages {
      body.writeImmutableBuffer(ByteBufferAllocator().grpcMessage(message, encoding: encoding))
    }
    let block = trailers.map { "\($0.name): \($0.value)\r\n" }.joined()
    body.writeInteger(UInt8(0x80))
    body.writeInteger(UInt32(block.utf8.count))
    body.writeString(block)
    if text {
      body = ByteBuffer(string: Data(body.readableBytesView).base64EncodedString())
    }
    return PlainHTTPReply(
      status: 200,
      headers: [("content-type", contentType)] + headers.map { ($0.name, $0.value) },
      body: body
    )
  }
}
