/// Base64url without padding (RFC 4648 §5): the alphabet of page tokens and API tokens.
///
/// Written out rather than Foundation's base64 with three `replacingOccurrences` passes,
/// which went through `NSString` and showed in a `ListEmployees` profile (one token per page).
enum Base64URL {
  private static let alphabet = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
  )

  /// Each byte's value in the alphabet, 0xFF for bytes outside it.
  private static let values: [UInt8] = {
    var values = [UInt8](repeating: 0xFF, count: 256)
    for (index, byte) in alphabet.enumerated() { values[Int(byte)] = UInt8(index) }
    return values
  }()

  private static let standardAlphabet = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8
  )

  static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count * 4 + 2) / 3)
    bytes.withUnsafeBufferPointer { Self.append($0, standard: false, to: &out) }
    return String(decoding: out, as: UTF8.self)
  }

  /// `bytes` in base64, appended to `out`: in this type's alphabet without padding, or, when
  /// `standard`, in RFC 4648 §4's alphabet with padding (proto3 JSON's `bytes`).
  static func append(_ bytes: UnsafeBufferPointer<UInt8>, standard: Bool, to out: inout [UInt8]) {
    out.appendWriting(atMost: (bytes.count + 2) / 3 * 4) {
      Self.write(bytes, standard: standard, to: $0)
    }
  }

  /// `append`'s text written at `out`, which has room for `(bytes.count + 2) / 3 * 4` bytes:
  /// how many it wrote (that many when `standard`, with its padding).
  @discardableResult
  static func write(
    _ bytes: UnsafeBufferPointer<UInt8>,
    standard: Bool,
    to out: UnsafeMutablePointer<UInt8>
  ) -> Int {
    (standard ? Self.standardAlphabet : Self.alphabet).withUnsafeBufferPointer { alphabet in
      var index = 0
      var next = out
      while index + 3 <= bytes.count {
        let group =
          UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
        next[0] = alphabet[Int(group >> 18 & 63)]
        next[1] = alphabet[Int(group >> 12 & 63)]
        next[2] = alphabet[Int(group >> 6 & 63)]
        next[3] = alphabet[Int(group & 63)]
        next += 4
        index += 3
      }
      // One or two bytes left: their 8 or 16 bits as 2 or 3 characters, then padding if asked.
      let left = bytes.count - index
      if left > 0 {
        var group = UInt32(bytes[index]) << 16
        if left == 2 { group |= UInt32(bytes[index + 1]) << 8 }
        next[0] = alphabet[Int(group >> 18 & 63)]
        next[1] = alphabet[Int(group >> 12 & 63)]
        if left == 2 { next[2] = alphabet[Int(group >> 6 & 63)] }
        next += left + 1
        if standard {
          for _ in 0 ..< 3 - left {
            next.pointee = UInt8(ascii: "=")
            next += 1
          }
        }
      }
      return next - out
    }
  }

  /// The bytes of unpadded base64url text; nil for a byte outside the alphabet, a length no
  /// encoding has (4n + 1), or leftover bits that are not zero (so each text has one meaning).
  static func decode(_ text: String) -> [UInt8]? {
    let values = Self.values
    let utf8 = Array(text.utf8)
    guard utf8.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(utf8.count * 3 / 4)
    var group: UInt32 = 0
    var bits = 0
    for byte in utf8 {
      let value = values[Int(byte)]
      guard value != 0xFF else { return nil }
      group = group << 6 | UInt32(value)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: group >> UInt32(bits)))
        group &= (1 << UInt32(bits)) - 1
      }
    }
    guard group == 0 else { return nil }
    return out
  }
}

extension Array where Element == UInt8 {
  /// Appends what `write` writes at the pointer it is given, into room for `bound` bytes
  /// (zero-filled first: an `Array` cannot grow uninitialized); `write` returns how many it wrote.
  mutating func appendWriting(
    atMost bound: Int,
    _ write: (UnsafeMutablePointer<UInt8>) -> Int
  ) {
    guard bound > 0 else { return }
    let start = self.count
    self.append(contentsOf: repeatElement(0, count: bound))
    let written = self.withUnsafeMutableBufferPointer { write($0.baseAddress! + start) }
    precondition(written <= bound, "wrote past the room reserved")
    self.removeLast(bound - written)
  }
}
