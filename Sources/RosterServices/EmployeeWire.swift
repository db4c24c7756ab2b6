internal import RosterDomain

/// The protobuf binary form of an employee, and of a page of employees (`ListEmployeesResponse`,
/// `EmployeePage`: `repeated Employee employees = 1; string next_page_token = 2;`), written
/// straight from the store's employees.
///
/// The same bytes as `Roster_V1_ListEmployeesResponse` built with `Roster_V1_Employee(_:mask:)`
/// and serialized by SwiftProtobuf (`EmployeeWireTests` compares them), without the 50
/// intermediate messages: SwiftProtobuf sizes each nested message twice (once for the whole
/// reply, once for its own length prefix) and visits every field through a getter that
/// retains its String, and the conversion copies every String into a message's storage. A
/// profile of `ListEmployees` put the conversion and the encoding at 23% of the server's samples
/// (docs/performance.md). Here each employee is sized once and written once, into one buffer of
/// the exact size (`Writer`).
enum EmployeeWire {
  /// The page's bytes: each employee with the fields `mask` selects, as
  /// `Roster_V1_Employee(_:mask:)` sets them, then the token when it is not empty.
  static func page(_ employees: [Employee], mask: EmployeeReadMask, nextPageToken: String) -> [UInt8] {
    var sizes: [Int] = []
    sizes.reserveCapacity(employees.count)
    var total = 0
    for employee in employees {
      let size = Self.size(employee, mask)
      sizes.append(size)
      total += 1 + Self.varintSize(UInt64(size)) + size
    }
    if !nextPageToken.isEmpty { total += Self.stringSize(nextPageToken) }
    return Self.written(size: total) { writer in
      for (employee, size) in zip(employees, sizes) {
        writer.byte(0x0A)  // field 1, length-delimited
        writer.varint(UInt64(size))
        Self.append(employee, mask, to: &writer)
      }
      if !nextPageToken.isEmpty { writer.string(2, nextPageToken) }
    }
  }

  /// One employee's bytes (`Employee`, as `GetEmployee` answers), with the fields `mask` selects.
  static func employee(_ employee: Employee, mask: EmployeeReadMask) -> [UInt8] {
    Self.written(size: Self.size(employee, mask)) { writer in Self.append(employee, mask, to: &writer) }
  }

  /// An array of exactly `size` bytes, which `write` fills.
  private static func written(size: Int, _ write: (inout Writer) -> Void) -> [UInt8] {
    guard size > 0 else { return [] }
    return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
      var writer = Writer(base: buffer.baseAddress!, capacity: size)
      write(&writer)
      precondition(writer.count == size, "EmployeeWire sized \(size) bytes and wrote \(writer.count)")
      initialized = writer.count
    }
  }

  // MARK: One employee

  /// What `Roster_V1_Employee(employee, mask:)` sets, field by field, in field-number order.
  private static func size(_ employee: Employee, _ mask: EmployeeReadMask) -> Int {
    let fields = mask.fields
    var size = 0
    // `guid` has no presence: written when not empty; the `optional` strings whenever set.
    if fields.contains(.guid), !employee.guid.isEmpty { size += Self.stringSize(employee.guid) }
    if fields.contains(.name) { size += Self.stringSize(employee.name) }
    if fields.contains(.department) { size += Self.stringSize(employee.department) }
    if fields.contains(.email) { size += Self.stringSize(employee.email) }
    if fields.contains(.phone) { size += Self.stringSize(employee.phone) }
    if fields.contains(.address) { size += Self.stringSize(employee.address) }
    if fields.contains(.about) { size += Self.stringSize(employee.about) }
    if fields.contains(.active) { size += 2 }
    if fields.contains(.startDate) { size += Self.stringSize(employee.startDate) }
    if fields.contains(.vacationDays) { size += 1 + Self.varintSize(Self.int32Bits(employee.vacationDays)) }
    if fields.contains(.thumbnail), let thumbnail = employee.thumbnail, !thumbnail.isEmpty {
      size += 1 + Self.varintSize(UInt64(thumbnail.count)) + thumbnail.count
    }
    if mask.hasPicture, employee.pictureEtag != nil { size += 2 }
    if mask.pictureEtag, let etag = employee.pictureEtag, !etag.isEmpty { size += Self.stringSize(etag) }
    if fields.contains(.salesCount), employee.salesCount != 0 {
      size += 1 + Self.varintSize(UInt64(bitPattern: employee.salesCount))
    }
    if fields.contains(.updateTime) {
      let timestamp = Self.timestampSize(employee.updateTimeMillis)
      size += 1 + Self.varintSize(UInt64(timestamp)) + timestamp
    }
    return size
  }

  private static func append(_ employee: Employee, _ mask: EmployeeReadMask, to writer: inout Writer) {
    let fields = mask.fields
    if fields.contains(.guid), !employee.guid.isEmpty { writer.string(1, employee.guid) }
    if fields.contains(.name) { writer.string(2, employee.name) }
    if fields.contains(.department) { writer.string(3, employee.department) }
    if fields.contains(.email) { writer.string(4, employee.email) }
    if fields.contains(.phone) { writer.string(5, employee.phone) }
    if fields.contains(.address) { writer.string(6, employee.address) }
    if fields.contains(.about) { writer.string(7, employee.about) }
    if fields.contains(.active) {
      writer.byte(8 << 3)
      writer.byte(employee.active ? 1 : 0)
    }
    if fields.contains(.startDate) { writer.string(9, employee.startDate) }
    if fields.contains(.vacationDays) {
      writer.byte(10 << 3)
      writer.varint(Self.int32Bits(employee.vacationDays))
    }
    if fields.contains(.thumbnail), let thumbnail = employee.thumbnail, !thumbnail.isEmpty {
      writer.byte(11 << 3 | 2)
      writer.varint(UInt64(thumbnail.count))
      thumbnail.withUnsafeBufferPointer { writer.bytes($0) }
    }
    if mask.hasPicture, employee.pictureEtag != nil {
      writer.byte(12 << 3)
      writer.byte(1)
    }
    if mask.pictureEtag, let etag = employee.pictureEtag, !etag.isEmpty { writer.string(13, etag) }
    if fields.contains(.salesCount), employee.salesCount != 0 {
      writer.byte(14 << 3)
      writer.varint(UInt64(bitPattern: employee.salesCount))
    }
    if fields.contains(.updateTime) {
      writer.byte(15 << 3 | 2)
      writer.varint(UInt64(Self.timestampSize(employee.updateTimeMillis)))
      let (seconds, nanos) = Self.timestamp(employee.updateTimeMillis)
      if seconds != 0 {
        writer.byte(1 << 3)
        writer.varint(UInt64(bitPattern: seconds))
      }
      if nanos != 0 {
        writer.byte(2 << 3)
        writer.varint(UInt64(bitPattern: Int64(nanos)))
      }
    }
  }

  // MARK: Scalars

  /// `Google_Protobuf_Timestamp(millis:)`'s two fields.
  private static func timestamp(_ millis: Int64) -> (seconds: Int64, nanos: Int32) {
    (millis / 1000, Int32(millis % 1000) * 1_000_000)
  }

  private static func timestampSize(_ millis: Int64) -> Int {
    let (seconds, nanos) = Self.timestamp(millis)
    var size = 0
    if seconds != 0 { size += 1 + Self.varintSize(UInt64(bitPattern: seconds)) }
    if nanos != 0 { size += 1 + Self.varintSize(UInt64(bitPattern: Int64(nanos))) }
    return size
  }

  /// An `int32` field's varint: `Int32(clamping:)`, as the conversion does, and a negative
  /// value sign-extended to 64 bits, as protobuf writes it.
  private static func int32Bits(_ value: Int) -> UInt64 {
    UInt64(bitPattern: Int64(Int32(clamping: value)))
  }

  /// A string field's tag, length and UTF-8 bytes.
  private static func stringSize(_ value: String) -> Int {
    let count = value.utf8.count
    return 1 + Self.varintSize(UInt64(count)) + count
  }

  private static func varintSize(_ value: UInt64) -> Int {
    // 1 byte per 7 bits, at least one.
    (64 - (value | 1).leadingZeroBitCount + 6) / 7
  }

}

extension EmployeeWire {
  /// Writes into a buffer of the size `EmployeeWire` computed first: one store per byte and one
  /// copy per string, where `[UInt8].append` checked the array's uniqueness and capacity each
  /// time. Every write is checked against the capacity, so a size computed too small traps
  /// rather than writing past the buffer.
  struct Writer {
    let base: UnsafeMutablePointer<UInt8>
    let capacity: Int
    private(set) var count = 0

    init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
      self.base = base
      self.capacity = capacity
    }

    mutating func byte(_ value: UInt8) {
      precondition(self.count < self.capacity, "EmployeeWire wrote past the size it computed")
      self.base[self.count] = value
      self.count += 1
    }

    mutating func varint(_ value: UInt64) {
      var value = value
      while value >= 0x80 {
        self.byte(UInt8(truncatingIfNeeded: value) | 0x80)
        value >>= 7
      }
      self.byte(UInt8(value))
    }

    mutating func bytes(_ source: UnsafeBufferPointer<UInt8>) {
      guard let start = source.baseAddress, !source.isEmpty else { return }
      precondition(source.count <= self.capacity - self.count, "EmployeeWire wrote past the size it computed")
      (self.base + self.count).initialize(from: start, count: source.count)
      self.count += source.count
    }

    /// A string field's tag, length and UTF-8 bytes.
    mutating func string(_ field: UInt8, _ value: String) {
      self.byte(field << 3 | 2)
      var value = value
      value.withUTF8 { utf8 in
        self.varint(UInt64(utf8.count))
        self.bytes(utf8)
      }
    }
  }
}
