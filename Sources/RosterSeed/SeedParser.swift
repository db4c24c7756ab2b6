/// A small JSON parser for the seed format: an array of objects whose values are strings,
/// numbers, booleans or null. Unknown keys are skipped, whatever their value.
internal import RosterDomain

struct SeedParser {
  private let bytes: UnsafeBufferPointer<UInt8>
  /// Where the next read starts; saved between calls by a reader that pulls batches.
  private(set) var position = 0

  init(bytes: UnsafeBufferPointer<UInt8>, position: Int = 0) {
    self.bytes = bytes
    self.position = position
  }

  /// Reads up to `limit` records of the array, starting at the array's `[` when `position`
  /// is 0. Returns fewer at the end of the array, and an empty array after it.
  mutating func readRecords(limit: Int, atEnd: inout Bool) throws -> [SeedRecord] {
    var records: [SeedRecord] = []
    if atEnd { return records }
    if self.position == 0 {
      try self.expect(UInt8(ascii: "["))
      if try self.peek() == UInt8(ascii: "]") {
        atEnd = true
        return records
      }
    } else {
      let next = try self.next()
      if next == UInt8(ascii: "]") {
        atEnd = true
        return records
      }
      guard next == UInt8(ascii: ",") else { throw self.error("expected ',' or ']'") }
    }
    while true {
      records.append(try self.readRecord())
      if records.count == limit { return records }
      let next = try self.next()
      if next == UInt8(ascii: "]") {
        atEnd = true
        return records
      }
      guard next == UInt8(ascii: ",") else { throw self.error("expected ',' or ']'") }
    }
  }

  mutating func readArray(_ body: (SeedRecord) throws -> Void) throws {
    try self.expect(UInt8(ascii: "["))
    if try self.peek() == UInt8(ascii: "]") { return }
    while true {
      try body(try self.readRecord())
      let next = try self.next()
      if next == UInt8(ascii: "]") { return }
      guard next == UInt8(ascii: ",") else { throw self.error("expected ',' or ']'") }
    }
  }

  private mutating func readRecord() throws -> SeedRecord {
    try self.expect(UInt8(ascii: "{"))
    var record = SeedRecord(employee: Employee())
    if try self.peek() == UInt8(ascii: "}") {
      self.position += 1
      return record
    }
    while true {
      let key = try self.readString()
      try self.expect(UInt8(ascii: ":"))
      switch key {
      case "guid": record.employee.guid = try self.readString()
      case "name": record.employee.name = try self.readString()
      case "department": record.employee.department = try self.readString()
      case "email": record.employee.email = try self.readString()
      case "phone": record.employee.phone = try self.readString()
      case "address": record.employee.address = try self.readString()
      case "about": record.employee.about = try self.readString()
      case "startDate": record.employee.startDate = try self.readString()
      case "active": record.employee.active = try self.readBool()
      case "vacationDays":
        // Exactly: a fraction, or a number past Int's range (which `Int(_:)` traps on), is no
        // count of days.
        guard let days = Int(exactly: try self.readNumber()) else {
          throw self.error("vacationDays must be a whole number")
        }
        record.employee.vacationDays = days
      case "picture": record.picture = try self.readOptionalString()
      default: try self.skipValue()
      }
      let next = try self.next()
      if next == UInt8(ascii: "}") { return record }
      guard next == UInt8(ascii: ",") else { throw self.error("expected ',' or '}'") }
    }
  }

  // MARK: Values

  private mutating func readString() throws -> String {
    try self.expect(UInt8(ascii: "\""))
    let start = self.position
    // Fast path: no escapes.
    while self.position < self.bytes.count {
      let byte = self.bytes[self.position]
      if byte == UInt8(ascii: "\"") {
        let text = String(
          decoding: UnsafeBufferPointer(rebasing: self.bytes[start ..< self.position]),
          as: UTF8.self
        )
        self.position += 1
        return text
      }
      if byte == UInt8(ascii: "\\") { break }
      self.position += 1
    }
    var out = Array(self.bytes[start ..< self.position])
    while self.position < self.bytes.count {
      let byte = self.bytes[self.position]
      self.position += 1
      switch byte {
      case UInt8(ascii: "\""):
        return String(decoding: out, as: UTF8.self)
      case UInt8(ascii: "\\"):
        try self.readEscape(into: &out)
      default:
        out.append(byte)
      }
    }
    throw self.error("unterminated string")
  }

  private mutating func readEscape(into out: inout [UInt8]) throws {
    guard self.position < self.bytes.count else { throw self.error("bad escape") }
    let byte = self.bytes[self.position]
    self.position += 1
    switch byte {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
    case UInt8(ascii: "b"): out.append(0x08)
    case UInt8(ascii: "f"): out.append(0x0C)
    case UInt8(ascii: "n"): out.append(0x0A)
    case UInt8(ascii: "r"): out.append(0x0D)
    case UInt8(ascii: "t"): out.append(0x09)
    case UInt8(ascii: "u"):
      var scalar = try self.readHex4()
      if (0xD800 ..< 0xDC00).contains(scalar) {
        guard self.position + 1 < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "\\"),
          self.bytes[self.position + 1] == UInt8(ascii: "u")
        else { throw self.error("lone surrogate") }
        self.position += 2
        let low = try self.readHex4()
        guard (0xDC00 ..< 0xE000).contains(low) else { throw self.error("bad surrogate pair") }
        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
      }
      guard let unicode = Unicode.Scalar(scalar) else { throw self.error("bad \\u escape") }
      out.append(contentsOf: Array(String(Character(unicode)).utf8))
    default:
      throw self.error("bad escape")
    }
  }

  private mutating func readHex4() throws -> UInt32 {
    guard self.position + 4 <= self.bytes.count else { throw self.error("bad \\u escape") }
    var value: UInt32 = 0
    for _ in 0 ..< 4 {
      let byte = self.bytes[self.position]
      self.position += 1
      let digit: UInt32
      switch byte {
      case UInt8(ascii: "0") ... UInt8(ascii: "9"): digit = UInt32(byte - 48)
      case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = UInt32(byte - 87)
      case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = UInt32(byte - 55)
      default: throw self.error("bad \\u escape")
      }
      value = value << 4 | digit
    }
    return value
  }

  private mutating func readOptionalString() throws -> String? {
    if try self.peek() == UInt8(ascii: "n") {
      try self.literal("null")
      return nil
    }
    return try self.readString()
  }

  private mutating func readBool() throws -> Bool {
    if try self.peek() == UInt8(ascii: "t") {
      try self.literal("true")
      return true
    }
    try self.literal("false")
    return false
  }

  private mutating func readNumber() throws -> Double {
    _ = try self.peek()
    let start = self.position
    while self.position < self.bytes.count {
      switch self.bytes[self.position] {
      case UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"),
        UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"):
        self.position += 1
      default:
        let text = String(
          decoding: UnsafeBufferPointer(rebasing: self.bytes[start ..< self.position]),
          as: UTF8.self
        )
        guard let value = Double(text) else { throw self.error("bad number") }
        return value
      }
    }
    throw self.error("unterminated number")
  }

  private mutating func skipValue() throws {
    switch try self.peek() {
    case UInt8(ascii: "\""): _ = try self.readString()
    case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try self.readBool()
    case UInt8(ascii: "n"): try self.literal("null")
    case UInt8(ascii: "["), UInt8(ascii: "{"):
      var depth = 0
      repeat {
        let byte = try self.peek()
        if byte == UInt8(ascii: "\"") {
          _ = try self.readString()
          continue
        }
        self.position += 1
        if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") { depth += 1 }
        if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") { depth -= 1 }
      } while depth > 0
    default: _ = try self.readNumber()
    }
  }

  // MARK: Bytes

  private mutating func literal(_ word: StaticString) throws {
    let count = word.utf8CodeUnitCount
    guard self.position + count <= self.bytes.count else { throw self.error("expected \(word)") }
    for index in 0 ..< count where self.bytes[self.position + index] != word.utf8Start[index] {
      throw self.error("expected \(word)")
    }
    self.position += count
  }

  /// The next non-space byte, without consuming it.
  private mutating func peek() throws -> UInt8 {
    while self.position < self.bytes.count {
      switch self.bytes[self.position] {
      case 0x20, 0x0A, 0x0D, 0x09: self.position += 1
      default: return self.bytes[self.position]
      }
    }
    throw self.error("unexpected end of file")
  }

  private mutating func next() throws -> UInt8 {
    let byte = try self.peek()
    self.position += 1
    return byte
  }

  private mutating func expect(_ byte: UInt8) throws {
    guard try self.next() == byte else {
      throw self.error("expected '\(Character(Unicode.Scalar(byte)))'")
    }
  }

  private func error(_ what: String) -> StoreError {
    StoreError(.invalidArgument, "seed file: \(what) at byte \(self.position)")
  }
}
