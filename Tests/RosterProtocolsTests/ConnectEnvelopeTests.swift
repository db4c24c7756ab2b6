import Foundation
import GRPCCore
import NIOCore
import Testing

@testable import RosterProtocols

@Suite("Connect and gRPC-Web envelopes")
struct ConnectEnvelopeTests {
  static func framed(_ flags: UInt8, _ payload: String) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeInteger(flags)
    buffer.writeInteger(UInt32(payload.utf8.count))
    buffer.writeString(payload)
    return buffer
  }

  @Test("envelopes split across pieces come out whole, each once, in order")
  func splitAcrossPieces() throws {
    var whole = Self.framed(0, "{\"a\":1}")
    var second = Self.framed(1, "xyz")
    whole.writeBuffer(&second)
    var reader = EnvelopeReader(limit: 1024, text: false)
    var out: [Envelope] = []
    // One byte at a time: the worst split a client can send.
    while let byte = whole.readSlice(length: 1) {
      out += try reader.append(byte)
    }
    #expect(out.map(\.flags) == [0, 1])
    #expect(out.map { String(buffer: $0.payload) } == ["{\"a\":1}", "xyz"])
    #expect(reader.isEmpty)
    _ = try reader.append(Self.framed(0, "partial").getSlice(at: 0, length: 8)!)
    #expect(!reader.isEmpty, "a partial envelope is left over")
  }

  @Test("a length over the limit is refused before its bytes arrive")
  func overLimit() {
    var reader = EnvelopeReader(limit: 16, text: false)
    var head = ByteBuffer()
    head.writeInteger(UInt8(0))
    head.writeInteger(UInt32(1 << 30))
    #expect(throws: RPCError.self) { try reader.append(head) }
  }

  @Test("grpc-web-text: base64 per message, padding in the middle, split anywhere")
  func webText() throws {
    let first = Data(Self.framed(0, "ab").readableBytesView).base64EncodedString()
    let second = Data(Self.framed(0, "cde").readableBytesView).base64EncodedString()
    #expect(first.hasSuffix("="), "the case needs padding inside the body")
    let text = Array((first + second).utf8)
    for cut in [1, 5, 9, text.count - 1] {
      var reader = EnvelopeReader(limit: 1024, text: true)
      var out = try reader.append(ByteBuffer(bytes: text[..<cut]))
      out += try reader.append(ByteBuffer(bytes: text[cut...]))
      #expect(out.map { String(buffer: $0.payload) } == ["ab", "cde"], "cut at \(cut)")
      #expect(reader.isEmpty)
    }
    var reader = EnvelopeReader(limit: 1024, text: true)
    #expect(throws: RPCError.self) { try reader.append(ByteBuffer(string: "!!!!")) }
  }

  @Test("Connect's end-of-stream message: the error by the Connect table, trailers as metadata")
  func endOfStream() throws {
    let ok = ReplyWriter.endOfStream(Status(code: .ok, message: ""), trailers: [:])
    #expect(String(decoding: ok, as: UTF8.self) == "{}")
    let failed = ReplyWriter.endOfStream(
      Status(code: .resourceExhausted, message: "too many"),
      trailers: ["x-why": "cap", "x-why-bin": .binary([1, 2])]
    )
    let json = try #require(try JSONSerialization.jsonObject(with: failed) as? [String: Any])
    let error = try #require(json["error"] as? [String: String])
    #expect(error == ["code": "resource_exhausted", "message": "too many"])
    let metadata = try #require(json["metadata"] as? [String: [String]])
    #expect(metadata["x-why"] == ["cap"])
    #expect(metadata["x-why-bin"] == ["AQI="])
  }
}
