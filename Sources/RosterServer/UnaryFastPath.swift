internal import GRPCCore
internal import GRPCProtobuf
internal import NIOCore
internal import SwiftProtobuf
internal import Synchronization
internal import RosterServices
internal import RosterTransport

/// The unary methods the server answers without grpc-swift's per-call machinery.
///
/// grpc-swift 2 gives every call a stream pipeline, async sequences and writers bridged
/// between the event loop and the cooperative pool, and two or more tasks; for a call as small
/// as `GetEmployee` that machinery costs several times the handler (issue "Speed against what
/// users would pick instead"). Here a unary call whose request is plain (one uncompressed
/// message within the size limit) runs as one task: the same interceptors in the same order,
/// then the service's own method, exactly as `GRPCServer` runs them (`ServerRPCExecutor`), and
/// its reply goes back as three HTTP/2 frames. Everything else takes grpc-swift's path. When every
/// interceptor is a `UnaryServerInterceptor` (all of Roster's are), the chain and the service's
/// `SimpleServiceProtocol` method run as one frame, without grpc-swift's streaming request and
/// response, and without an executor hop between the levels (`executeUnary`).
///
/// ```swift
/// let fastPath = UnaryFastPath(methods: [...], interceptors: interceptors, maxRequestBytes: 4 << 20)
/// ```
struct UnaryFastPath: Sendable {
  /// One unary method: its descriptor and how to run one call of it.
  struct Method: Sendable {
    let descriptor: MethodDescriptor
    /// Whether the call runs on its connection's event loop (a point read or write whose work
    /// beyond the store is a fixed few microseconds) rather than on the cooperative pool
    /// (pages, batches and analytics, whose mapping grows with the reply).
    let onEventLoop: Bool
    /// Runs one call; the request's message, or nil when the client sent none, and the reply's
    /// messages, in `WireFormat`.
    let run: @Sendable (ByteBuffer?, WireFormat, Metadata, ServerContext, Interception) async -> UnaryOutcome

    /// A method with protobuf messages, whose handler takes the request's message and returns
    /// the response's: the service's `SimpleServiceProtocol` method. Run as one frame through
    /// `UnaryServerInterceptor`s when every interceptor is one, else through the streaming
    /// request and response grpc-swift's router would make.
    static func protobuf<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>(
      _ descriptor: MethodDescriptor,
      input: Input.Type = Input.self,
      output: Output.Type = Output.self,
      onEventLoop: Bool,
      _ handler: @escaping @Sendable (Input, ServerContext) async throws -> Output
    ) -> Method {
      Method(descriptor: descriptor, onEventLoop: onEventLoop) { bytes, format, metadata, context, interception in
        switch interception {
        case .unary(let interceptors):
          return await UnaryFastPath.executeUnary(
            message: bytes.map(BufferBytes.init),
            format: format,
            metadata: metadata,
            context: context,
            interceptors: interceptors,
            handler: handler
          )
        case .streaming(let interceptors):
          return await UnaryFastPath.execute(
            request: StreamingServerRequest(
              metadata: metadata,
              messages: RPCAsyncSequence(wrapping: OneMessage<Input>(bytes: bytes.map(BufferBytes.init), format: format))
            ),
            context: context,
            interceptors: interceptors,
            format: format
          ) { request, context in
            let request = try await ServerRequest(stream: request)
            return StreamingServerResponse(single: ServerResponse(message: try await handler(request.message, context)))
          }
        }
      }
    }
  }

  /// How a call goes through the server's interceptors: as one frame, when every one of them is
  /// a `UnaryServerInterceptor`, or through `intercept`, as `GRPCServer` runs them.
  enum Interception: Sendable {
    case unary([any UnaryServerInterceptor])
    case streaming([any ServerInterceptor])

    init(_ interceptors: [any ServerInterceptor]) {
      let unary = interceptors.compactMap { $0 as? any UnaryServerInterceptor }
      self = unary.count == interceptors.count ? .unary(unary) : .streaming(interceptors)
    }
  }

  /// How a call's messages are written: protobuf's binary format (gRPC, Connect's
  /// `application/proto`) or the proto3 JSON mapping (Connect's `application/json`: int64 as
  /// strings, enums by name; unknown fields ignored on input, fields in a stable order on
  /// output).
  enum WireFormat: Sendable {
    case binary
    case json
  }

  /// The methods, by HTTP/2 `:path`.
  let methods: [String: Method]
  /// The interceptors every call goes through, outermost first (as given to `GRPCServer`).
  let interception: Interception
  /// The largest request message taken (the transport's `maxRequestPayloadSize`).
  let maxRequestBytes: Int

  init(methods: [Method], interceptors: [any ServerInterceptor], maxRequestBytes: Int) {
    self.methods = Dictionary(
      methods.map { ("/" + $0.descriptor.fullyQualifiedMethod, $0) },
      uniquingKeysWith: { first, _ in first }
    )
    self.interception = Interception(interceptors)
    self.maxRequestBytes = maxRequestBytes
  }

  /// What `ServerRPCExecutor` does for one call, for a request of exactly one message: the
  /// interceptors (an interceptor's throw becomes its call's status), the handler, then the
  /// response's producer into a collector; errors map to statuses the same way.
  static func execute<Input: Sendable, Output: SwiftProtobuf.Message>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    interceptors: [any ServerInterceptor],
    format: WireFormat = .binary,
    handler: @escaping @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async -> UnaryOutcome {
    let accepted: Result<StreamingServerResponse<Output>.Contents, RPCError>
    do {
      accepted = try await Self.intercept(
        request: request,
        context: context,
        interceptors: interceptors[...],
        handler: handler
      ).accepted
    } catch {
      accepted = .failure(
        Self.rpcError(error, unknown: "Service method threw an unknown error.")
      )
    }
    switch accepted {
    case .failure(let error):
      return UnaryOutcome(headers: nil, messages: [], status: Status(error), trailers: error.metadata)
    case .success(let contents):
      let collector = ResponseCollector<Output>(format: format)
      do {
        // The reply is serialized and written in a later job, so the calls that arrived
        // together on a loop do their handlers (the store's reads) back to back, then their
        // replies: measured at 16×16, interleaving the two for each call cost up to 15% more
        // CPU per GetEmployee (docs/performance.md, "Staging").
        await Task.yield()
        let trailers = try await contents.producer(RPCWriter(wrapping: collector))
        return UnaryOutcome(
          headers: contents.metadata,
          messages: collector.messages,
          status: Status(code: .ok, message: ""),
          trailers: trailers
        )
      } catch {
        let error = Self.rpcError(error, unknown: "")
        return UnaryOutcome(
          headers: contents.metadata,
          messages: collector.messages,
          status: Status(error),
          trailers: error.metadata
        )
      }
    }
  }

  /// `execute` for a call whose interceptors each run it as one frame: the same steps, with the
  /// request's message decoded and the handler called inside the innermost interceptor, and
  /// errors becoming statuses at each level of the chain as they do in `intercept`.
  static func executeUnary<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>(
    message bytes: BufferBytes?,
    format: WireFormat,
    metadata: Metadata,
    context: ServerContext,
    interceptors: [any UnaryServerInterceptor],
    handler: @Sendable (Input, ServerContext) async throws -> Output
  ) async -> UnaryOutcome {
    let output: Output
    do {
      output = try await Self.interceptUnary(metadata: metadata, context: context, interceptors: interceptors[...]) {
        guard let bytes else { throw RPCError(code: .internalError, message: "Empty stream.") }
        let input: Input =
          switch format {
          case .binary: try ProtobufDeserializer<Input>().deserialize(bytes)
          case .json: try JSONMessages.decode(Input.self, from: bytes.buffer)
          }
        return try await handler(input, context)
      }
    } catch {
      let error = Self.rpcError(error, unknown: "Service method threw an unknown error.")
      return UnaryOutcome(headers: nil, messages: [], status: Status(error), trailers: error.metadata)
    }
    // As in `execute`: the calls that arrived together do their handlers back to back, then
    // their replies.
    await Task.yield()
    do {
      return UnaryOutcome(
        headers: [:],
        messages: [try Self.serialize(output, format: format)],
        status: Status(code: .ok, message: ""),
        trailers: [:]
      )
    } catch {
      let error = Self.rpcError(error, unknown: "")
      return UnaryOutcome(headers: [:], messages: [], status: Status(error), trailers: error.metadata)
    }
  }

  /// The unary chain: each interceptor runs the rest; what one throws becomes a status there.
  private static func interceptUnary<Output: Sendable>(
    metadata: Metadata,
    context: ServerContext,
    interceptors: ArraySlice<any UnaryServerInterceptor>,
    handler: () async throws -> Output
  ) async throws -> Output {
    guard let interceptor = interceptors.first else { return try await handler() }
    do {
      return try await interceptor.interceptUnary(metadata: metadata, context: context) {
        try await Self.interceptUnary(
          metadata: metadata,
          context: context,
          interceptors: interceptors.dropFirst(),
          handler: handler
        )
      }
    } catch {
      throw Self.rpcError(error, unknown: "")
    }
  }

  /// One response message in the call's wire format.
  static func serialize<Output: SwiftProtobuf.Message>(_ message: Output, format: WireFormat) throws -> ByteBuffer {
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

  /// `ServerRPCExecutor._intercept`: each interceptor wraps the rest; what one throws is its
  /// call's response.
  private static func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    interceptors: ArraySlice<any ServerInterceptor>,
    handler: @escaping @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    guard let interceptor = interceptors.first else {
      return try await handler(request, context)
    }
    let rest = interceptors.dropFirst()
    do {
      return try await interceptor.intercept(request: request, context: context) {
        try await Self.intercept(request: $0, context: $1, interceptors: rest, handler: handler)
      }
    } catch {
      return StreamingServerResponse(error: Self.rpcError(error, unknown: ""))
    }
  }

  private static func rpcError(_ error: any Error, unknown message: String) -> RPCError {
    if let error = error as? RPCError { return error }
    if let error = error as? any RPCErrorConvertible { return RPCError(error) }
    return RPCError(code: .unknown, message: message, cause: error)
  }
}

/// How a unary call ended: the response's metadata (nil when it was refused before a response
/// began: a trailers-only reply), its messages, the status and the trailing metadata.
struct UnaryOutcome: Sendable {
  var headers: Metadata?
  var messages: [ByteBuffer]
  var status: Status
  var trailers: Metadata
}

extension Status {
  fileprivate init(_ error: RPCError) {
    self.init(code: Status.Code(error.code), message: error.message)
  }
}

/// The request's single message (or none), deserialized when the handler first asks for it
/// (where grpc-swift deserializes it too, so a malformed message fails the same way).
private struct OneMessage<Message: SwiftProtobuf.Message>: AsyncSequence, Sendable {
  typealias Element = Message
  typealias Failure = any Error
  let bytes: BufferBytes?
  let format: UnaryFastPath.WireFormat

  struct AsyncIterator: AsyncIteratorProtocol {
    typealias Failure = any Error
    var bytes: BufferBytes?
    let format: UnaryFastPath.WireFormat

    mutating func next() async throws -> Message? {
      guard let bytes = self.bytes else { return nil }
      self.bytes = nil
      switch self.format {
      case .binary:
        return try ProtobufDeserializer<Message>().deserialize(bytes)
      case .json:
        return try JSONMessages.decode(Message.self, from: bytes.buffer)
      }
    }
  }

  func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(bytes: self.bytes, format: self.format)
  }
}

/// Collects a unary response's message(s), serialized, for the event loop to write.
private final class ResponseCollector<Output: SwiftProtobuf.Message>: RPCWriterProtocol, Sendable {
  private let collected = Mutex<[ByteBuffer]>([])
  private let format: UnaryFastPath.WireFormat

  init(format: UnaryFastPath.WireFormat) {
    self.format = format
  }

  var messages: [ByteBuffer] { self.collected.withLock { $0 } }

  func write(_ element: Output) async throws {
    let buffer = try UnaryFastPath.serialize(element, format: self.format)
    self.collected.withLock { $0.append(buffer) }
  }

  func write(contentsOf elements: some Sequence<Output>) async throws {
    for element in elements { try await self.write(element) }
  }
}
