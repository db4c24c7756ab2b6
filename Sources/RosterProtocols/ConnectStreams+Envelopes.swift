internal import Foundation
internal import GRPCCore
internal import NIOCore

// The length-prefixed messages of a Connect or gRPC-Web body, cut from its bytes as they arrive.

/// One length-prefixed message of a Connect or gRPC-Web body: its flags byte and its bytes.
struct Envelope: Sendable {
  var flags: UInt8
  var payload: ByteBuffer
}

/// Cuts a request's body into envelopes as it arrives, within the message size limit; with
/// `text`, the body is gRPC-Web's base64 (each message may carry its own padding).
struct EnvelopeReader {
  let limit: Int
  let text: Bool
  private var buffer = ByteBuffer()
  private var textRemainder: [UInt8] = []

  init(limit: Int, text: Bool) {
    self.limit = limit
    self.text = text
  }

  /// Whether no partial envelope is left over.
  var isEmpty: Bool { self.buffer.readableBytes == 0 && self.textRemainder.isEmpty }

  /// The envelopes completed by `bytes`.
  mutating func append(_ bytes: ByteBuffer) throws -> [Envelope] {
    var bytes = self.text ? try self.decodeText(bytes) : bytes
    if self.buffer.readableBytes == 0 {
      self.buffer = bytes
    } else {
      self.buffer.writeBuffer(&bytes)
    }
    var envelopes: [Envelope] = []
    var needed = 5
    while self.buffer.readableBytes >= 5 {
      let start = self.buffer.readerIndex
      let flags = self.buffer.getInteger(at: start, as: UInt8.self)!
      let length = Int(self.buffer.getInteger(at: start + 1, as: UInt32.self)!)
      guard length <= self.limit else {
        throw RPCError(
          code: .resourceExhausted,
          message: "a request message of \(length) bytes is over the limit of \(self.limit) bytes"
        )
      }
      guard self.buffer.readableBytes >= 5 + length else {
        needed = 5 + length
        break
      }
      self.buffer.moveReaderIndex(forwardBy: 5)
      // A copy of its own: a slice would hold the whole read buffer it came in (up to
      // megabytes) for as long as the message waits to be read.
      var payload = ByteBufferAllocator().buffer(capacity: length)
      payload.writeImmutableBuffer(self.buffer.readSlice(length: length)!)
      envelopes.append(Envelope(flags: flags, payload: payload))
    }
    // What is left goes into a buffer of its own, made for the whole message once: appending
    // to one that the envelopes above still share would copy it at every piece.
    if self.buffer.readableBytes == 0 {
      self.buffer = ByteBuffer()
    } else if !envelopes.isEmpty || self.buffer.capacity < needed {
      var rest = ByteBufferAllocator().buffer(capacity: max(needed, self.buffer.readableBytes))
      rest.writeBuffer(&self.buffer)
      self.buffer = rest
    }
    return envelopes
  }

  /// The bytes of the complete base64 quartets so far; what is left of a quartet waits.
  private mutating func decodeText(_ bytes: ByteBuffer) throws -> ByteBuffer {
    self.textRemainder += bytes.readableBytesView.filter {
      !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09)
    }
    let whole = self.textRemainder.count - self.textRemainder.count % 4
    var decoded = ByteBuffer()
    var segmentStart = 0
    var index = 0
    while index < whole {
      // A quartet that ends in padding closes a message's base64: decode up to it.
      if self.textRemainder[index + 3] == UInt8(ascii: "=") || index + 4 == whole {
        guard let data = Data(base64Encoded: Data(self.textRemainder[segmentStart ..< (index + 4)]))
        else {
          throw RPCError(
            code: .invalidArgument,
            message: "the grpc-web-text body is not valid base64"
          )
        }
        decoded.writeBytes(data)
        segmentStart = index + 4
      }
      index += 4
    }
    self.textRemainder.removeFirst(whole)
    return decoded
  }
}
