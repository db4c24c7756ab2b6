internal import Foundation
internal import GRPCCore
internal import NIOCore
internal import NIOHPACK
internal import RosterLocks
internal import RosterTransport

// The messages of a streamed Connect or gRPC-Web call: the request's envelopes as the call
// reads them, and the reply as the HTTP side writes it.

/// A streamed call's request as its handler reads it: the metadata, then each message of the
/// envelopes the HTTP side pushes, inflated when the handler asks for it, off the event loop
/// (the server deserializes it, from JSON or protobuf). `taken` hears how many bytes
/// each message read held, so the HTTP/2 side can let the client send that much more.
final class RequestEnvelopes: AsyncSequence, Sendable {
  typealias Element = RPCRequestPart<BufferBytes>
  typealias Failure = any Error

  let limit: Int
  private let encoding: MessageEncoding?

  private struct State {
    var metadata: Metadata?
    var queue: [Envelope] = []
    var next = 0
    var queuedBytes = 0
    var finished = false
    var failure: (any Error)?
    var waiter: CheckedContinuation<Void, Never>?
    var taken: (@Sendable (Int) -> Void)?

    var isReady: Bool { self.metadata != nil || self.next < self.queue.count || self.finished }
  }

  private let state: Locked<State>

  init(metadata: Metadata, encoding: MessageEncoding?, limit: Int) {
    self.state = Locked(State(metadata: metadata))
    self.encoding = encoding
    self.limit = limit
  }

  /// Calls `taken` with the size of every message the handler reads from now on.
  func onTaken(_ taken: @escaping @Sendable (Int) -> Void) {
    self.state.withLock { $0.taken = taken }
  }

  /// The bytes of messages pushed and not yet read.
  var queuedBytes: Int { self.state.withLock { $0.queuedBytes } }

  func push(_ envelope: Envelope) {
    let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
      guard !state.finished else { return nil }
      state.queue.append(envelope)
      state.queuedBytes += envelope.payload.readableBytes
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }

  /// The request ended; with `error`, the handler's next read throws it (after the messages
  /// already pushed when the request ended well).
  func finish(throwing error: (any Error)? = nil) {
    let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
      guard !state.finished else { return nil }
      state.finished = true
      state.failure = error
      if error != nil {
        state.queue.removeAll()
        state.next = 0
        state.queuedBytes = 0
      }
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }

  private enum Step {
    case part(Element)
    case envelope(Envelope, taken: (@Sendable (Int) -> Void)?)
    case end((any Error)?)
    case wait
  }

  fileprivate func next() async throws -> Element? {
    while true {
      let step = self.state.withLock { state -> Step in
        if let metadata = state.metadata {
          state.metadata = nil
          return .part(.metadata(metadata))
        }
        if state.next < state.queue.count {
          let envelope = state.queue[state.next]
          state.next += 1
          state.queuedBytes -= envelope.payload.readableBytes
          // Messages read are let go of: at once when none is left, else once they are half
          // the queue (a client that sends as fast as the call reads never empties it).
          if state.next == state.queue.count {
            state.queue.removeAll(keepingCapacity: true)
            state.next = 0
          } else if state.next >= 16 && state.next * 2 >= state.queue.count {
            state.queue.removeFirst(state.next)
            state.next = 0
          }
          return .envelope(envelope, taken: state.taken)
        }
        if state.finished {
          defer { state.failure = nil }
          return .end(state.failure)
        }
        return .wait
      }
      switch step {
      case .part(let part):
        return part
      case .envelope(let envelope, let taken):
        taken?(envelope.payload.readableBytes + 5)
        return .message(BufferBytes(try self.decode(envelope)))
      case .end(let error):
        if let error { throw error }
        return nil
      case .wait:
        await withTaskCancellationHandler {
          await withCheckedContinuation { continuation in
            let ready = self.state.withLock { state -> Bool in
              if state.isReady { return true }
              state.waiter = continuation
              return false
            }
            if ready { continuation.resume() }
          }
        } onCancel: {
          self.finish(throwing: CancellationError())
        }
      }
    }
  }

  /// A message as the server reads it: inflated.
  private func decode(_ envelope: Envelope) throws -> ByteBuffer {
    guard envelope.flags & 0x02 == 0 else {
      throw RPCError(
        code: .invalidArgument,
        message: "a request envelope has the end-of-stream flag, which only replies carry"
      )
    }
    var payload = envelope.payload
    if envelope.flags & 0x01 != 0 {
      guard let encoding = self.encoding else {
        throw RPCError(
          code: .internalError,
          message:
            "a message is marked compressed but the request names no encoding (connect-content-encoding or grpc-encoding)"
        )
      }
      payload = try encoding.decompress(
        payload,
        limit: self.limit,
        allocator: ByteBufferAllocator()
      )
    }
    return payload
  }

  struct AsyncIterator: AsyncIteratorProtocol {
    let envelopes: RequestEnvelopes

    mutating func next() async throws -> Element? {
      try await self.envelopes.next()
    }
  }

  func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(envelopes: self)
  }
}

/// A streamed call's reply, written by the call's executor: the head with the response
/// metadata, each message framed (JSON for `connect+json`, compressed when the client accepts
/// it and it pays, base64 for `grpc-web-text`) and written on its own, then the end: Connect's
/// end-of-stream message, or gRPC-Web's trailers (in the head alone when nothing was sent).
final class ReplyWriter: ClosableRPCWriterProtocol, Sendable {
  typealias Element = RPCResponsePart<BufferBytes>

  private let wire: ConnectStreams.WireProtocol
  private let contentType: String
  private let encoding: MessageEncoding?
  private let extraHeaders: [(String, String)]
  private let deadline: ContinuousClock.Instant?
  private let sink: ReplySink
  private let progress = Locked<(headSent: Bool, ended: Bool)>((false, false))

  init(
    wire: ConnectStreams.WireProtocol,
    contentType: String,
    encoding: MessageEncoding?,
    extraHeaders: [(String, String)],
    deadline: ContinuousClock.Instant?,
    sink: ReplySink
  ) {
    self.wire = wire
    self.contentType = contentType
    self.encoding = encoding
    self.extraHeaders = extraHeaders
    self.deadline = deadline
    self.sink = sink
  }

  func write(_ element: Element) async throws {
    switch element {
    case .metadata(let metadata):
      self.sendHead(metadata)
    case .message(let bytes):
      self.sendHead([:])
      try await self.sink.body(try self.frame(bytes.buffer))
    case .status(let status, let trailers):
      self.end(status, trailers: trailers)
    }
  }

  func write(contentsOf elements: some Sequence<Element>) async throws {
    for element in elements { try await self.write(element) }
  }

  func finish() async {
    self.end(
      Status(code: .internalError, message: "the call ended without a status"),
      trailers: [:]
    )
  }

  func finish(throwing error: any Error) async {
    let rpcError = error as? RPCError ?? RPCError(code: .unknown, message: "")
    self.end(
      Status(code: Status.Code(rpcError.code), message: rpcError.message),
      trailers: rpcError.metadata
    )
  }

  private var encodingHeader: String {
    self.wire.isConnect ? "connect-content-encoding" : "grpc-encoding"
  }

  private func sendHead(_ metadata: Metadata) {
    guard
      self.progress.withLock({ state in
        defer { state.headSent = true }
        return !state.headSent && !state.ended
      })
    else { return }
    var headers = HPACKHeaders()
    headers.add(metadata)
    var pairs = [("content-type", self.contentType)]
    if let encoding = self.encoding { pairs.append((self.encodingHeader, encoding.rawValue)) }
    self.sink.head(pairs + headers.map { ($0.name, $0.value) } + self.extraHeaders)
  }

  /// A reply message (JSON already for `connect+json`: the method's codec wrote it so) as
  /// its envelope.
  private func frame(_ message: ByteBuffer) throws -> ByteBuffer {
    var message = message
    var flags: UInt8 = 0
    if let encoding = self.encoding, message.readableBytes >= MessageEncoding.minimumResponseBytes,
      let compressed = encoding.compress(message, allocator: ByteBufferAllocator())
    {
      message = compressed
      flags = 1
    }
    return self.envelope(flags, message)
  }

  private func envelope(_ flags: UInt8, _ payload: ByteBuffer) -> ByteBuffer {
    var framed = ByteBuffer()
    framed.reserveCapacity(5 + payload.readableBytes)
    framed.writeInteger(flags)
    framed.writeInteger(UInt32(payload.readableBytes))
    framed.writeImmutableBuffer(payload)
    if self.wire.isText {
      return ByteBuffer(string: Data(framed.readableBytesView).base64EncodedString())
    }
    return framed
  }

  /// Ends the reply with `status` and `trailers`, once.
  func end(_ status: Status, trailers: Metadata) {
    guard
      let headSent = self.progress.withLock({ state -> Bool? in
        guard !state.ended else { return nil }
        state.ended = true
        return state.headSent
      })
    else { return }
    var status = status
    if status.code == .cancelled, let deadline = self.deadline, ContinuousClock.now >= deadline {
      status = Status(code: .deadlineExceeded, message: "the call's deadline passed")
    }
    switch self.wire {
    case .connect:
      if !headSent {
        self.sink.head([("content-type", self.contentType)] + self.extraHeaders)
      }
      self.sink.end(
        self.envelope(0x02, ByteBuffer(bytes: Self.endOfStream(status, trailers: trailers)))
      )
    case .grpcWeb:
      let block = HPACKHeaders(status: status, metadata: trailers, trailersOnly: false)
      guard headSent else {
        // Trailers-only: the status in the head, no body.
        self.sink.head(
          [("content-type", self.contentType)] + block.map { ($0.name, $0.value) }
            + self.extraHeaders
        )
        self.sink.end(ByteBuffer())
        return
      }
      self.sink.end(
        self.envelope(
          0x80,
          ByteBuffer(string: block.map { "\($0.name): \($0.value)\r\n" }.joined())
        )
      )
    }
  }

  /// Connect's end-of-stream message: `{"error": {"code", "message"}, "metadata": {…}}`, each
  /// part only when there is one.
  static func endOfStream(_ status: Status, trailers: Metadata) -> Data {
    struct ErrorBody: Encodable {
      var code: String
      var message: String?
      var details: [[String: String]]?
    }
    struct EndOfStream: Encodable {
      var error: ErrorBody?
      var metadata: [String: [String]]?
    }
    var end = EndOfStream()
    if status.code != .ok {
      let code = RPCError.Code(status.code) ?? .unknown
      let details = JSONMessages.connectDetails(trailers)
      end.error = ErrorBody(
        code: ConnectUnary.connectCode(code).0,
        message: status.message.isEmpty ? nil : status.message,
        details: details.isEmpty ? nil : details
      )
    }
    var headers = HPACKHeaders()
    headers.add(trailers)
    // Shown as the error's details, above.
    headers.remove(name: "grpc-status-details-bin")
    if !headers.isEmpty {
      end.metadata = Dictionary(grouping: headers, by: { $0.name }).mapValues { $0.map(\.value) }
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return (try? encoder.encode(end)) ?? Data("{}".utf8)
  }
}
