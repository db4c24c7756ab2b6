internal import RosterDomain
internal import RosterStore

/// The opaque `page_token`: a keyset cursor bound to the filters and order that made it. An
/// aggregate's token holds the last group key as its one key.
///
/// Layout before base64url: version (1), fingerprint (8), checksum (8), row id (8), key count
/// (1), then each key as a 4-byte length and UTF-8 bytes. The fingerprint ties the token to
/// its query; the checksum rejects garbage. Tokens are not secret: a forged one can only move
/// the start of a listing the caller may read anyway.
struct PageToken: Equatable {
  var fingerprint: UInt64
  var cursor: EmployeeCursor

  private static let version: UInt8 = 1

  /// A fingerprint of what a token must be reused with.
  static func fingerprint(filter: EmployeeFilter, order: EmployeeOrder) -> UInt64 {
    let active = filter.active.map { $0 ? "1" : "0" } ?? "-"
    return self.fingerprint(parts: [
      order.rawValue, filter.department ?? "", active,
      filter.nameContains.map(TextFolding.fold) ?? "",
    ])
  }

  /// A fingerprint of any request's fields that a token must be reused with.
  static func fingerprint(parts: [String]) -> UInt64 {
    fnv1a(Array(parts.joined(separator: "\u{1F}").utf8))
  }

  func encoded() -> String {
    var body: [UInt8] = []
    append(self.cursor.id, to: &body)
    body.append(UInt8(self.cursor.keys.count))
    for key in self.cursor.keys {
      let bytes = Array(key.utf8)
      append(UInt32(bytes.count), to: &body)
      body += bytes
    }
    var bytes: [UInt8] = [Self.version]
    append(self.fingerprint, to: &bytes)
    append(fnv1a(body), to: &bytes)
    bytes += body
    return Base64URL.encode(bytes)
  }

  /// Decodes a token; nil when it is not one this server made.
  init?(decoding text: String) {
    guard let bytes = Base64URL.decode(text) else { return nil }
    var reader = ByteReader(bytes: bytes)
    guard reader.byte() == Self.version,
      let fingerprint: UInt64 = reader.integer(),
      let checksum: UInt64 = reader.integer(),
      fnv1a(reader.rest) == checksum,
      let id: Int64 = reader.integer(),
      let count = reader.byte()
    else { return nil }
    var keys: [String] = []
    for _ in 0 ..< count {
      guard let length: UInt32 = reader.integer(), let bytes = reader.bytes(Int(length)) else {
        return nil
      }
      keys.append(String(decoding: bytes, as: UTF8.self))
    }
    guard reader.rest.isEmpty else { return nil }
    self.fingerprint = fingerprint
    self.cursor = EmployeeCursor(keys: keys, id: id)
  }

  init(fingerprint: UInt64, cursor: EmployeeCursor) {
    self.fingerprint = fingerprint
    self.cursor = cursor
  }
}

private struct ByteReader {
  let bytes: [UInt8]
  var position = 0

  var rest: ArraySlice<UInt8> { self.bytes[self.position...] }

  mutating func byte() -> UInt8? {
    guard self.position < self.bytes.count else { return nil }
    defer { self.position += 1 }
    return self.bytes[self.position]
  }

  mutating func bytes(_ count: Int) -> ArraySlice<UInt8>? {
    guard count >= 0, self.position + count <= self.bytes.count else { return nil }
    defer { self.position += count }
    return self.bytes[self.position ..< self.position + count]
  }

  mutating func integer<T: FixedWidthInteger>() -> T? {
    guard let slice = self.bytes(MemoryLayout<T>.size) else { return nil }
    return slice.reduce(T.zero) { $0 << 8 | T($1) }
  }
}

private func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
  for shift in stride(from: (MemoryLayout<T>.size - 1) * 8, through: 0, by: -8) {
    bytes.append(UInt8(truncatingIfNeeded: value >> shift))
  }
}

private func fnv1a(_ bytes: some Sequence<UInt8>) -> UInt64 {
  var hash: UInt64 = 0xcbf2_9ce4_8422_2325
  for byte in bytes {
    hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
  }
  return hash
}
