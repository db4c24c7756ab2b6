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
/// the exact size.
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
    var bytes: [UInt8] = []
    bytes.reserveCapacity(total)
    for (employee, size) in zip(employees, sizes) {
      bytes.append(0x0A)  // field 1, length-delimited
      Self.appendVarint(UInt64(size), to: &bytes)
      Self.append(employee, mask, to: &bytes)
    }
    if !nextPageToken.isEmpty { Self.appendString(2, nextPageToken, to: &bytes) }
    return bytes
  }

  /// One employee's bytes (`Employee`, as `GetEmployee` answers), with the fields `mask` selects.
  static func employee(_ employee: Employee, mask: EmployeeReadMask) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(Self.size(employee, mask))
    Self.append(employee, mask, to: &bytes)
    return bytes
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

  private static func append(_ employee: Employee, _ mask: EmployeeReadMask, to bytes: inout [UInt8]) {
    let fields = mask.fields
    if fields.contains(.guid), !employee.guid.isEmpty { Self.appendString(1, employee.guid, to: &bytes) }
    if fields.contains(.name) { Self.appendString(2, employee.name, to: &bytes) }
    if fields.contains(.department) { Self.appendString(3, employee.department, to: &bytes) }
    if fields.contains(.email) { Self.appendString(4, employee.email, to: &bytes) }
    if fields.contains(.phone) { Self.appendString(5, employee.phone, to: &bytes) }
    if fields.contains(.address) { Self.appendString(6, employee.address, to: &bytes) }
    if fields.contains(.about) { Self.appendString(7, employee.about, to: &bytes) }
    if fields.contains(.active) {
      bytes.append(8 << 3)
      bytes.append(employee.active ? 1 : 0)
    }
    if fields.contains(.startDate) { Self.appendString(9, employee.startDate, to: &bytes) }
    if fields.contains(.vacationDays) {
      bytes.append(10 << 3)
      Self.appendVarint(Self.int32Bits(employee.vacationDays), to: &bytes)
    }
    if fields.contains(.thumbnail), let thumbnail = employee.thumbnail, !thumbnail.isEmpty {
      bytes.append(11 << 3 | 2)
      Self.appendVarint(UInt64(thumbnail.count), to: &bytes)
      bytes.append(contentsOf: thumbnail)
    }
    if mask.hasPicture, employee.pictureEtag != nil {
      bytes.append(12 << 3)
      bytes.append(1)
    }
    if mask.pictureEtag, let etag = employee.pictureEtag, !etag.isEmpty { Self.appendString(13, etag, to: &bytes) }
    if fields.contains(.salesCount), employee.salesCount != 0 {
      bytes.append(14 << 3)
      Self.appendVarint(UInt64(bitPattern: employee.salesCount), to: &bytes)
    }
    if fields.contains(.updateTime) {
      bytes.append(15 << 3 | 2)
      Self.appendVarint(UInt64(Self.timestampSize(employee.updateTimeMillis)), to: &bytes)
      let (seconds, nanos) = Self.timestamp(employee.updateTimeMillis)
      if seconds != 0 {
        bytes.append(1 << 3)
        Self.appendVarint(UInt64(bitPattern: seconds), to: &bytes)
      }
      if nanos != 0 {
        bytes.append(2 << 3)
        Self.appendVarint(UInt64(bitPattern: Int64(nanos)), to: &bytes)
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

  private static func appendString(_ field: UInt8, _ value: String, to bytes: inout [UInt8]) {
    bytes.append(field << 3 | 2)
    var value = value
    value.withUTF8 { utf8 in
      Self.appendVarint(UInt64(utf8.count), to: &bytes)
      bytes.append(contentsOf: utf8)
    }
  }

  private static func varintSize(_ value: UInt64) -> Int {
    // 1 byte per 7 bits, at least one.
    (64 - (value | 1).leadingZeroBitCount + 6) / 7
  }

  private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
    var value = value
    while value >= 0x80 {
      bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
      value >>= 7
    }
    bytes.append(UInt8(value))
  }
}
