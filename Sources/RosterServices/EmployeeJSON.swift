internal import RosterDomain
internal import RosterStore

/// The proto3 JSON form of an employee and of a page of employees (`ListEmployeesResponse`,
/// `EmployeePage`), written straight from the store's employees: the Connect protocol's
/// `application/json` replies.
///
/// What SwiftProtobuf writes for `Roster_V1_Employee(_:mask:)` (fields in number order under
/// their JSON names, `int64` as a string, bytes in base64, the timestamp in RFC 3339, fields
/// without presence left out at their default), without the intermediate messages and
/// SwiftProtobuf's visitor: each employee is written once into one growing buffer.
/// `EmployeeJSONTests` decodes it with SwiftProtobuf and compares the messages on random
/// employees and masks, and debug builds check every reply (`UnaryFastPath`).
enum EmployeeJSON {
  /// One employee, with the fields `mask` selects.
  static func employee(_ employee: Employee, mask: EmployeeReadMask) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(512)
    Self.append(employee, mask, to: &out)
    return out
  }

  /// A page: its employees, then the token when it is not empty.
  static func page(
    _ employees: [Employee],
    mask: EmployeeReadMask,
    nextPageToken: String
  ) -> [UInt8] {
    let rows = Rows(mask: mask)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(employees.count * 512)
    for employee in employees { rows.append(employee, to: &bytes) }
    return Self.page(written: bytes, nextPageToken: nextPageToken)
  }

  /// Writes each row of a page as it is read, as `page` writes it (`EmployeeRowWriter`): the
  /// rows' objects, separated by commas; `page(written:nextPageToken:)` closes the page.
  struct Rows: EmployeeRowWriter {
    let mask: EmployeeReadMask

    func append(_ row: EmployeeRow, to bytes: inout [UInt8]) {
      if !bytes.isEmpty { bytes.append(UInt8(ascii: ",")) }
      EmployeeJSON.append(row, self.mask, to: &bytes)
    }

    func append(_ employee: Employee, to bytes: inout [UInt8]) {
      if !bytes.isEmpty { bytes.append(UInt8(ascii: ",")) }
      EmployeeJSON.append(employee, self.mask, to: &bytes)
    }
  }

  /// A page whose rows `Rows` wrote, then the token when it is not empty.
  static func page(written rows: [UInt8], nextPageToken: String) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(rows.count + 64 + nextPageToken.utf8.count)
    out.append(UInt8(ascii: "{"))
    if !rows.isEmpty {
      Self.key(#""employees":"#, first: true, to: &out)
      out.append(UInt8(ascii: "["))
      out.append(contentsOf: rows)
      out.append(UInt8(ascii: "]"))
    }
    if !nextPageToken.isEmpty {
      Self.key(#""nextPageToken":"#, first: rows.isEmpty, to: &out)
      Self.string(nextPageToken, to: &out)
    }
    out.append(UInt8(ascii: "}"))
    return out
  }

  /// One employee's object, as `Roster_V1_Employee(_:mask:)` sets its fields: written through
  /// a pointer into room reserved for the most it can take (`Writer`).
  private static func append(
    _ employee: some EmployeeWireSource,
    _ mask: EmployeeReadMask,
    to out: inout [UInt8]
  ) {
    Writer.append(to: &out, atMost: Self.bound(employee)) { out in
      Self.write(employee, mask, to: &out)
    }
  }

  /// The most bytes `write` takes for `employee`: every text escaped at its longest (6 bytes a
  /// byte, `\u00XX`), the thumbnail in base64, and room for every key, number and the time.
  private static func bound(_ employee: some EmployeeWireSource) -> Int {
    var text = 0
    for field in EmployeeWireText.allCases { text += employee.withText(field) { $0.count } }
    let thumbnail = employee.withThumbnail { ($0?.count ?? 0) }
    // Keys and punctuation about 200 bytes, numbers and the time under 100.
    return 512 + 6 * text + (thumbnail + 2) / 3 * 4
  }

  private static func write(
    _ employee: some EmployeeWireSource,
    _ mask: EmployeeReadMask,
    to out: inout Writer
  ) {
    let fields = mask.fields(for: employee)
    var first = true
    func key(_ quoted: StaticString) {
      if !first { out.byte(UInt8(ascii: ",")) }
      first = false
      out.bytes(quoted)
    }
    func text(_ quoted: StaticString, _ field: EmployeeWireText) {
      key(quoted)
      employee.withText(field) { Self.string(utf8: $0, to: &out) }
    }
    out.byte(UInt8(ascii: "{"))
    // `guid` has no presence: left out when empty, as every field below without it.
    if fields.contains(.guid), employee.withText(.guid, { !$0.isEmpty }) {
      text(#""guid":"#, .guid)
    }
    if fields.contains(.name) { text(#""name":"#, .name) }
    if fields.contains(.department) { text(#""department":"#, .department) }
    if fields.contains(.email) { text(#""email":"#, .email) }
    if fields.contains(.phone) { text(#""phone":"#, .phone) }
    if fields.contains(.address) { text(#""address":"#, .address) }
    if fields.contains(.about) { text(#""about":"#, .about) }
    if fields.contains(.active) {
      key(#""active":"#)
      out.bytes(employee.active ? "true" : "false")
    }
    if fields.contains(.startDate) { text(#""startDate":"#, .startDate) }
    if fields.contains(.vacationDays) {
      key(#""vacationDays":"#)
      Self.integer(Int64(Int32(clamping: employee.vacationDays)), to: &out)
    }
    if fields.contains(.thumbnail) {
      employee.withThumbnail { thumbnail in
        guard let thumbnail, !thumbnail.isEmpty else { return }
        key(#""thumbnail":"#)
        out.byte(UInt8(ascii: "\""))
        out.base64(thumbnail)
        out.byte(UInt8(ascii: "\""))
      }
    }
    if mask.hasPicture, employee.hasPicture {
      key(#""hasPicture":"#)
      out.bytes("true")
    }
    if mask.pictureEtag, employee.withText(.pictureEtag, { !$0.isEmpty }) {
      text(#""pictureEtag":"#, .pictureEtag)
    }
    if fields.contains(.salesCount), employee.salesCount != 0 {
      // int64 is a string in proto3 JSON.
      key(#""salesCount":"#)
      out.byte(UInt8(ascii: "\""))
      Self.integer(Int64(employee.salesCount), to: &out)
      out.byte(UInt8(ascii: "\""))
    }
    if fields.contains(.updateTime) {
      key(#""updateTime":"#)
      Self.timestamp(millis: employee.updateTimeMillis, to: &out)
    }
    out.byte(UInt8(ascii: "}"))
  }

  /// A key given with its quotes and colon (`"name":`), after a comma unless it is the
  /// object's first.
  private static func key(_ quoted: StaticString, first: Bool, to out: inout [UInt8]) {
    if !first { out.append(UInt8(ascii: ",")) }
    quoted.withUTF8Buffer { out.append(contentsOf: $0) }
  }

  /// A JSON string: `"` and `\` escaped, control characters as JSON's short escapes or
  /// `\u00XX`, everything else as its UTF-8 bytes.
  private static func string(_ value: String, to out: inout [UInt8]) {
    var value = value
    value.withUTF8 { bytes in
      Writer.append(to: &out, atMost: 2 + 6 * bytes.count) { Self.string(utf8: bytes, to: &$0) }
    }
  }

  /// `string` of text given as its UTF-8 bytes.
  private static func string(utf8 bytes: UnsafeBufferPointer<UInt8>, to out: inout Writer) {
    out.byte(UInt8(ascii: "\""))
    var start = 0
    var index = 0
    while index < bytes.count {
      // Eight bytes at a time while none of them needs an escape: most text has none.
      if index + 8 <= bytes.count,
        !Self.needsEscape(
          UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)
        )
      {
        index += 8
        continue
      }
      let byte = bytes[index]
      guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
        index += 1
        continue
      }
      out.bytes(UnsafeBufferPointer(rebasing: bytes[start ..< index]))
      index += 1
      start = index
      out.byte(UInt8(ascii: "\\"))
      switch byte {
      case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.byte(byte)
      case 0x08: out.byte(UInt8(ascii: "b"))
      case 0x0C: out.byte(UInt8(ascii: "f"))
      case 0x0A: out.byte(UInt8(ascii: "n"))
      case 0x0D: out.byte(UInt8(ascii: "r"))
      case 0x09: out.byte(UInt8(ascii: "t"))
      default:
        out.bytes("u00")
        out.byte(Self.hexDigits[Int(byte >> 4)])
        out.byte(Self.hexDigits[Int(byte & 0xF)])
      }
    }
    out.bytes(UnsafeBufferPointer(rebasing: bytes[start...]))
    out.byte(UInt8(ascii: "\""))
  }

  /// Whether any of the eight bytes of `word` is a control character (below 0x20), `"` or
  /// `\`: the word-at-a-time tests for a byte below n and for a zero byte, which never miss one.
  static func needsEscape(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    func hasZero(_ x: UInt64) -> Bool { (x &- ones) & ~x & highs != 0 }
    let control = (word &- ones &* 0x20) & ~word & highs != 0
    return control || hasZero(word ^ (ones &* 0x22)) || hasZero(word ^ (ones &* 0x5C))
  }

  private static let hexDigits = Array("0123456789abcdef".utf8)
  /// A timestamp in RFC 3339, UTC, with milliseconds when there are any (as SwiftProtobuf
  /// writes a `Timestamp` whose nanoseconds are whole milliseconds).
  private static func timestamp(millis: Int64, to out: inout Writer) {
    // Floored, so that a time before 1970 is still a valid date and time of day.
    var (seconds, milliseconds) = millis.quotientAndRemainder(dividingBy: 1000)
    if milliseconds < 0 {
      milliseconds += 1000
      seconds -= 1
    }
    var (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
    if secondOfDay < 0 {
      secondOfDay += 86_400
      days -= 1
    }
    let date = CivilDate(dayNumber: Int(days))
    out.byte(UInt8(ascii: "\""))
    if (0 ... 9999).contains(date.year) {
      Self.digits(date.year, 4, to: &out)
      out.byte(UInt8(ascii: "-"))
      Self.digits(date.month, 2, to: &out)
      out.byte(UInt8(ascii: "-"))
      Self.digits(date.day, 2, to: &out)
    } else {
      out.bytes(date.text)
    }
    out.byte(UInt8(ascii: "T"))
    Self.digits(Int(secondOfDay / 3600), 2, to: &out)
    out.byte(UInt8(ascii: ":"))
    Self.digits(Int(secondOfDay / 60 % 60), 2, to: &out)
    out.byte(UInt8(ascii: ":"))
    Self.digits(Int(secondOfDay % 60), 2, to: &out)
    if milliseconds != 0 {
      out.byte(UInt8(ascii: "."))
      Self.digits(Int(milliseconds), 3, to: &out)
    }
    out.byte(UInt8(ascii: "Z"))
    out.byte(UInt8(ascii: "\""))
  }

  /// `value` in decimal, with a minus sign when it is negative.
  private static func integer(_ value: Int64, to out: inout Writer) {
    if value < 0 { out.byte(UInt8(ascii: "-")) }
    var magnitude = value.magnitude
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
      var first = digits.count
      repeat {
        first -= 1
        digits[first] = UInt8(ascii: "0") + UInt8(magnitude % 10)
        magnitude /= 10
      } while magnitude > 0
      out.bytes(UnsafeBufferPointer(rebasing: digits[first...]))
    }
  }

  /// `value` (0 or more) in `width` decimal digits (at most 4), zero-padded.
  private static func digits(_ value: Int, _ width: Int, to out: inout Writer) {
    // Divisions by constants, which compile to multiplications.
    let zero = UInt8(ascii: "0")
    if width >= 4 { out.byte(zero + UInt8(value / 1000 % 10)) }
    if width >= 3 { out.byte(zero + UInt8(value / 100 % 10)) }
    if width >= 2 { out.byte(zero + UInt8(value / 10 % 10)) }
    out.byte(zero + UInt8(value % 10))
  }

  /// Bytes written through a pointer into room reserved beforehand (`append(to:atMost:)`), as
  /// `EmployeeWire.Writer` writes protobuf: no capacity or uniqueness check for each byte, and
  /// one comparison with the end, which stops the process rather than write past the room.
  struct Writer {
    private var next: UnsafeMutablePointer<UInt8>
    private let end: UnsafeMutablePointer<UInt8>

    /// Appends to `out` what `write` writes, which may be at most `bound` bytes.
    static func append(to out: inout [UInt8], atMost bound: Int, _ write: (inout Writer) -> Void) {
      out.appendWriting(atMost: bound) { base in
        var writer = Writer(next: base, end: base + bound)
        write(&writer)
        return writer.next - base
      }
    }

    mutating func byte(_ byte: UInt8) {
      precondition(self.next < self.end, "EmployeeJSON wrote past its bound")
      self.next.pointee = byte
      self.next += 1
    }

    mutating func bytes(_ bytes: UnsafeBufferPointer<UInt8>) {
      guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
      precondition(self.end - self.next >= bytes.count, "EmployeeJSON wrote past its bound")
      self.next.update(from: base, count: bytes.count)
      self.next += bytes.count
    }

    mutating func bytes(_ text: StaticString) {
      text.withUTF8Buffer { self.bytes($0) }
    }

    mutating func bytes(_ text: String) {
      var text = text
      text.withUTF8 { self.bytes($0) }
    }

    /// `bytes` in base64 with padding (RFC 4648 §4): proto3 JSON's `bytes`.
    mutating func base64(_ bytes: UnsafeBufferPointer<UInt8>) {
      let size = (bytes.count + 2) / 3 * 4
      precondition(self.end - self.next >= size, "EmployeeJSON wrote past its bound")
      Base64URL.write(bytes, standard: true, to: self.next)
      self.next += size
    }
  }
}
