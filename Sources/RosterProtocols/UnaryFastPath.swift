package import GRPCCore
internal import GRPCProtobuf
package import NIOCore
package import RosterServices
package import RosterStore
internal import RosterTransport
package import SwiftProtobuf

/// The unary methods the server answers without grpc-swift's per-call machinery.
///
/// grpc-swift 2 gives every call a stream pipeline, async sequences and writers bridged
/// between the event loop and the cooperative pool, and two or more tasks; for a call as small
/// as `GetEmployee` that machinery costs several times the handler (issue "Speed against what
/// users would pick instead"). Here a unary call whose request is plain (one uncompressed
/// message within the size limit) runs as one task: the same interceptors in the same order,
/// then the service's `SimpleServiceProtocol` method, as `GRPCServer` runs them
/// (`ServerRPCExecutor`), and its reply goes back as three HTTP/2 frames. Everything else takes
/// grpc-swift's path. The interceptors run through `CallChain.run`, as one frame: no streaming
/// request or response, no executor hop between them. A method whose handler never waits
/// (`Method.now`) runs with no task at all on Roster's own transport, through
/// `CallChain.runNow`: on the event loop, or in its store's point-call jobs.
///
/// ```swift
/// let fastPath = UnaryFastPath(methods: [...], chain: chain, maxRequestBytes: 4 << 20)
/// ```
package struct UnaryFastPath: Sendable {
  /// One unary method: its descriptor and how to run one call of it.
  package struct Method: Sendable {
    package let descriptor: MethodDescriptor
    /// Whether the call runs on its connection's event loop (a point read or write whose work
    /// beyond the store is a fixed few microseconds) rather than on the cooperative pool
    /// (pages, batches and analytics, whose mapping grows with the reply): the method's
    /// declared lane (`MethodPolicies`).
    let onEventLoop: Bool
    /// Runs one call; the request's message, or nil when the client sent none, and the reply's
    /// messages, in `WireFormat`.
    let run:
      @Sendable (ByteBuffer?, WireFormat, Metadata, ServerContext, CallChain)
        async
        -> UnaryOutcome
    /// Runs one call without suspending, on the caller's thread (the connection's event loop,
    /// with no task): for a method whose handler never waits (`protobufNow`); nil for the
    /// others: no task, no executor hops, no async frames in the interceptors
    /// (docs/performance.md, "What each part saved").
    var now:
      (
        @Sendable (
          ByteBuffer?, WireFormat, Metadata, ServerContext, ContinuousClock.Instant,
          CallChain
        ) ->
          UnaryOutcome
      )?
    /// Where `now` runs: in the store's point-call jobs (`PointCalls`: a point read, which
    /// waits for the store's lane), or on the connection's event loop when nil.
    var pointCalls: (any PointCalls)?
    /// The store that may refuse a call with a deadline before it starts (`StoreAdmission`),
    /// for a method that runs in a task: refused then on the thread that read it.
    var admission: (any StoreAdmission)?

    /// A method with protobuf messages, whose handler takes the request's message and returns
    /// the response's: the service's `SimpleServiceProtocol` method.
    /// `staged`: whether the reply waits for the calls that arrived with it to run their
    /// handlers first (`execute`); false for a method that does not read the store.
    package static func protobuf<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>(
      _ descriptor: MethodDescriptor,
      input: Input.Type = Input.self,
      output: Output.Type = Output.self,
      staged: Bool = true,
      _ handler: @escaping @Sendable (Input, ServerContext) async throws -> Output
    ) -> Method {
      .serializing(
        descriptor,
        staged: staged,
        { input, context, _ in try await handler(input, context) },
        with: UnaryFastPath.serialize
      )
    }

    /// A method whose handler never waits: run without a task where the transport can (`now`),
    /// and in a task of its own like any other method elsewhere (the Connect protocol and
    /// gRPC-Web).
    package static func protobufNow<Input: SwiftProtobuf.Message, Output: SwiftProtobuf.Message>(
      _ descriptor: MethodDescriptor,
      input: Input.Type = Input.self,
      output: Output.Type = Output.self,
      _ handler: @escaping @Sendable (Input, ServerContext) throws -> Output
    ) -> Method {
      // A handler that never waits runs on the event loop on every path.
      Method.serializing(
        descriptor,
        onEventLoop: true,
        staged: false,
        { (input: Input, context, _) in try handler(input, context) },
        with: UnaryFastPath.serialize
      )
      .answeringNow(handler, serialize: UnaryFastPath.serialize)
    }

    /// This method, refused before it starts when `store` says it could not start in time
    /// (`StoreAdmission`).
    package func admitted(by store: (any StoreAdmission)?) -> Method {
      var method = self
      method.admission = store
      return method
    }

    /// This method, also answered without a task (`now`) by `handler`, which never waits: on
    /// the connection's event loop, or in `store`'s point-call jobs.
    package func answeringNow<Input: SwiftProtobuf.Message, Output: Sendable>(
      in store: (any PointCalls)? = nil,
      _ handler: @escaping @Sendable (Input, ServerContext) throws -> Output,
      serialize: @escaping @Sendable (Output, WireFormat) throws -> ByteBuffer
    ) -> Method {
      var method = self
      method.pointCalls = store
      method.now = { bytes, format, metadata, context, arrived, chain in
        UnaryFastPath.executeNow(
          message: bytes.map(BufferBytes.init),
          format: format,
          metadata: metadata,
          context: context,
          arrived: arrived,
          chain: chain,
          handler: handler,
          serialize: serialize
        )
      }
      return method
    }

    /// A method whose reply's binary form is written straight from what the store read
    /// (`DirectReply.binary()`: `GetEmployee`, `ListEmployees`); JSON takes the protobuf message.
    /// The handler is told whether the reply goes out in the binary form.
    package static func direct<Input: SwiftProtobuf.Message, Output: DirectReply>(
      _ descriptor: MethodDescriptor,
      _ handler: @escaping @Sendable (Input, ServerContext, _ binary: Bool) async throws -> Output
    ) -> Method {
      .serializing(
        descriptor,
        staged: true,
        handler,
        with: UnaryFastPath.serialize(direct:format:)
      )
    }

    /// A method whose handler's reply `serialize` writes in the call's wire format; the
    /// handler is told whether that is the binary form.
    private static func serializing<Input: SwiftProtobuf.Message, Output: Sendable>(
      _ descriptor: MethodDescriptor,
      onEventLoop: Bool? = nil,
      staged: Bool,
      _ handler: @escaping @Sendable (Input, ServerContext, _ binary: Bool) async throws -> Output,
      with serialize: @escaping @Sendable (Output, WireFormat) throws -> ByteBuffer
    ) -> Method {
      // The declared lane, unless the caller knows better (`protobufNow`).
      let onEventLoop =
        onEventLoop ?? (MethodPolicies.server.byMethod[descriptor]?.lane == .eventLoop)
      return Method(descriptor: descriptor, onEventLoop: onEventLoop) {
        bytes,
        format,
        metadata,
        context,
        chain in
        await UnaryFastPath.execute(
          message: bytes.map(BufferBytes.init),
          format: format,
          metadata: metadata,
          context: context,
          chain: chain,
          staged: staged,
          handler: { input, context in try await handler(input, context, format == .binary) },
          serialize: serialize
        )
      }
    }
  }

  /// How a call's messages are written: protobuf's binary format (gRPC, Connect's
  /// `application/proto`) or the proto3 JSON mapping (Connect's `application/json`: int64 as
  /// strings, enums by name; unknown fields ignored on input, fields in a stable order on
  /// output).
  package enum WireFormat: Sendable {
    case binary
    case json
  }

  /// The methods, by HTTP/2 `:path`.
  package let methods: [String: Method]
  /// The interceptors every call goes through, outermost first (as given to `GRPCServer`).
  let chain: CallChain
  /// The largest request message taken (the transport's `maxRequestPayloadSize`).
  let maxRequestBytes: Int

  package init(methods: [Method], chain: CallChain, maxRequestBytes: Int) {
    self.methods = Dictionary(
      methods.map { ("/" + $0.descriptor.fullyQualifiedMethod, $0) },
      uniquingKeysWith: { first, _ in first }
    )
    self.chain = chain
    self.maxRequestBytes = maxRequestBytes
  }

  /// What `ServerRPCExecutor` does for one call of exactly one message, as one frame: the
  /// interceptors, then the request's message decoded and the handler called inside them
  /// (where grpc-swift decodes it, so a malformed one fails the same way); what is thrown
  /// becomes a status.
  static func execute<Input: SwiftProtobuf.Message, Output: Sendable>(
    message bytes: BufferBytes?,
    format: WireFormat,
    metadata: Metadata,
    context: ServerContext,
    chain: CallChain,
    staged: Bool = true,
    handler: @Sendable (Input, ServerContext) async throws -> Output,
    serialize: (Output, WireFormat) throws -> ByteBuffer
  ) async -> UnaryOutcome {
    let (output, headers): (Output, Metadata)
    do {
      (output, headers) = try await chain.run(metadata: metadata, context: context) {
        try await handler(try Self.decode(bytes, format: format), context)
      }
    } catch {
      return .refused(.ending(error, unknown: "Service method threw an unknown error."))
    }
    // The reply is serialized and written in a later job, so the calls that arrived together
    // on a loop do their handlers (the store's reads) back to back, then their replies:
    // interleaving the two for each call cost more CPU per GetEmployee when measured. A call
    // that reads nothing has nothing to stage, and the yield is a job more.
    if staged { await Task.yield() }
    return Self.reply(output, headers: headers, format: format, serialize: serialize)
  }

  /// `execute` for a call whose handler never waits, without a task (`Method.now`): the same
  /// interceptors in the same order (`CallChain.runNow`), the same decoding,
  /// statuses and reply. Nothing to stage: the calls of a read run one after the other anyway.
  static func executeNow<Input: SwiftProtobuf.Message, Output: Sendable>(
    message bytes: BufferBytes?,
    format: WireFormat,
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant,
    chain: CallChain,
    handler: (Input, ServerContext) throws -> Output,
    serialize: (Output, WireFormat) throws -> ByteBuffer
  ) -> UnaryOutcome {
    let output: Output
    do {
      output = try chain.runNow(metadata: metadata, context: context, arrived: arrived) {
        try handler(try Self.decode(bytes, format: format), context)
      }
    } catch {
      return .refused(.ending(error, unknown: "Service method threw an unknown error."))
    }
    return Self.reply(output, format: format, serialize: serialize)
  }

  /// The outcome of a call refused with `error` before its handler could run, through the
  /// interceptors as if its handler had thrown it.
  static func refusedNow(
    _ error: RPCError,
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant,
    chain: CallChain
  ) -> UnaryOutcome {
    do {
      try chain.runNow(metadata: metadata, context: context, arrived: arrived) {
        () throws -> Void in
        throw error
      }
      return .refused(error)
    } catch {
      return .refused(.ending(error))
    }
  }

  /// The request's message, decoded where grpc-swift decodes it (inside the innermost
  /// interceptor), so a malformed one fails the same way.
  private static func decode<Input: SwiftProtobuf.Message>(
    _ bytes: BufferBytes?,
    format: WireFormat
  ) throws -> Input {
    guard let bytes else { throw RPCError(code: .internalError, message: "Empty stream.") }
    switch format {
    case .binary: return try ProtobufDeserializer<Input>().deserialize(bytes)
    case .json: return try JSONMessages.decode(Input.self, from: bytes.buffer)
    }
  }

  /// A handler's output as the call's reply; a failure to serialize it, as a status after the
  /// response's metadata.
  private static func reply<Output>(
    _ output: Output,
    headers: Metadata = [:],
    format: WireFormat,
    serialize: (Output, WireFormat) throws -> ByteBuffer
  ) -> UnaryOutcome {
    do {
      return UnaryOutcome(
        headers: headers,
        messages: [try serialize(output, format)],
        status: Status(code: .ok, message: ""),
        trailers: [:]
      )
    } catch {
      let error = RPCError.ending(error)
      return UnaryOutcome(
        headers: [:],
        messages: [],
        status: Status(error),
        trailers: error.metadata
      )
    }
  }

}
