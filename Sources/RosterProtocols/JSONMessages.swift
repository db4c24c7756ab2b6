internal import Foundation
internal import GRPCCore
internal import GRPCProtobuf
internal import NIOCore
internal import RosterDomain
internal import SwiftProtobuf

/// Request messages in the proto3 JSON mapping (the Connect protocol's `application/json` and
/// `connect+json`), and what a client is told when one does not read.
///
/// swift-protobuf's JSON errors name neither the field nor the place (`malformedNumber`). When
/// a message fails, the body is read again to say which: not JSON at all (Foundation's parser
/// gives the place), not an object, or the first field whose value does not fit its type (each
/// field decoded on its own). The error is `INVALID_ARGUMENT` naming the field, with a
/// `google.rpc.BadRequest` detail for it, which Connect clients read in the error's `details`
/// and gRPC clients in `grpc-status-details-bin`.
enum JSONMessages {
  /// `Message` from its JSON; unknown fields are ignored.
  static func decode<Message: SwiftProtobuf.Message>(
    _ type: Message.Type,
    from bytes: ByteBuffer
  ) throws -> Message {
    let json = Array(bytes.readableBytesView)
    var options = JSONDecodingOptions()
    options.ignoreUnknownFields = true
    do {
      return try Message(jsonUTF8Bytes: json, options: options)
    } catch {
      throw Self.diagnose(Message.self, json: json, error: error)
    }
  }

  private static func diagnose<Message: SwiftProtobuf.Message>(
    _ type: Message.Type,
    json: [UInt8],
    error: any Error
  ) -> GoogleRPCStatus {
    let name = Message.protoMessageName
    func refusal(field: String, _ description: String) -> GoogleRPCStatus {
      GoogleRPCStatus(
        code: .invalidArgument,
        message: field.isEmpty ? description : "\(ClientText.excerpt(field)): \(description)",
        details: .badRequest(
          violations: [.init(field: ClientText.excerpt(field), description: description)]
        )
      )
    }
    let parsed: Any
    do {
      parsed = try JSONSerialization.jsonObject(with: Data(json), options: [.fragmentsAllowed])
    } catch {
      let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
      return refusal(field: "", "the request is not JSON (\(reason)); \(name) is a JSON object")
    }
    guard let object = parsed as? [String: Any] else {
      return refusal(field: "", "the request must be a JSON object (\(name))")
    }
    var options = JSONDecodingOptions()
    options.ignoreUnknownFields = true
    for key in object.keys.sorted() {
      guard let value = object[key],
        let alone = try? JSONSerialization.data(
          withJSONObject: [key: value],
          options: [.fragmentsAllowed]
        )
      else { continue }
      do {
        _ = try Message(jsonUTF8Bytes: Array(alone), options: options)
      } catch {
        return refusal(field: key, "not a valid value for this field of \(name) (\(error))")
      }
    }
    return refusal(field: "", "not valid JSON for \(name) (\(error))")
  }

  /// The details of an error's `grpc-status-details-bin` (a `google.rpc.Status`), as the
  /// Connect protocol writes them: each `{"type": name, "value": base64}`.
  static func connectDetails(_ metadata: Metadata) -> [[String: String]] {
    guard case .binary(let bytes)? = metadata["grpc-status-details-bin"].first(where: { _ in true })
    else {
      return []
    }
    var details: [[String: String]] = []
    var status = WireReader(bytes[...])
    while let (field, value) = status.next() {
      guard field == 3, case .bytes(let any) = value else { continue }
      var typeURL = ""
      var payload: ArraySlice<UInt8> = []
      var reader = WireReader(any)
      while let (field, value) = reader.next() {
        guard case .bytes(let bytes) = value else { continue }
        if field == 1 { typeURL = String(decoding: bytes, as: UTF8.self) }
        if field == 2 { payload = bytes }
      }
      let type = typeURL.split(separator: "/").last.map(String.init) ?? typeURL
      var value = Data(payload).base64EncodedString()
      while value.hasSuffix("=") { value.removeLast() }
      details.append(["type": type, "value": value])
    }
    return details
  }
}

/// Reads protobuf's wire format field by field: enough for `google.rpc.Status` and
/// `google.protobuf.Any`, whose types this module does not have.
private struct WireReader {
  enum Value {
    case varint(UInt64)
    case bytes(ArraySlice<UInt8>)
    case other
  }

  private var bytes: ArraySlice<UInt8>

  init(_ bytes: ArraySlice<UInt8>) {
    self.bytes = bytes
  }

  private mutating func varint() -> UInt64? {
    var value: UInt64 = 0
    var shift: UInt64 = 0
    while let byte = self.bytes.popFirst() {
      value |= UInt64(byte & 0x7F) << shift
      if byte & 0x80 == 0 { return value }
      shift += 7
      if shift > 63 { return nil }
    }
    return nil
  }

  /// The next field: its number and value; nil at the end or at a malformed field.
  mutating func next() -> (Int, Value)? {
    guard !self.bytes.isEmpty, let key = self.varint() else { return nil }
    switch key & 7 {
    case 0:
      return self.varint().map { (Int(key >> 3), .varint($0)) }
    case 1, 5:
      let width = key & 7 == 1 ? 8 : 4
      guard self.bytes.count >= width else { return nil }
      self.bytes.removeFirst(width)
      return (Int(key >> 3), .other)
    case 2:
      guard let length = self.varint(), length <= UInt64(self.bytes.count) else { return nil }
      let value = self.bytes.prefix(Int(length))
      self.bytes.removeFirst(Int(length))
      return (Int(key >> 3), .bytes(value))
    default:
      return nil
    }
  }
}
