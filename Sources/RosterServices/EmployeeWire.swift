internal import RosterDomain
internal import RosterStore

/// The protobuf binary form of an employee, and of a page of employees (`ListEmployeesResponse`,
/// `EmployeePage`: `repeated Employee employees = 1; string next_page_token = 2;`), written
/// straight from the store's employees.
///
/// The same bytes as `Roster_V1_ListEmployeesResponse` built with `Roster_V1_Employee(_:mask:)`
/// and serialized by SwiftProtobuf (`EmployeeWireTests` compares them), without the 50
/// intermediate messages: SwiftProtobuf sizes each nested message twice (once for the whole
/// reply, once for its own length prefix) and visits every field through a getter that
/// retains its String, and the conversion copies every String into a message's storage (a
/// large share of a `ListEmployees` profile: docs/performance.md). Here each employee is sized once and written once, into one buffer of
/// the exact size (`Writer`).
enum EmployeeWire {
  /// The page's bytes: each employee with the fields `mask` selects, as
  /// `Roster_V1_Employee(_:mask:)` sets them, then the token when it is not empty; the same
  /// entries `Rows` writes as a store reads its rows.
  static func page(
    _ employees: [Employee],
    mask: EmployeeReadMask,
    nextPageToken: String
  ) -> [UInt8] {
    let rows = Rows(mask: mask)
    var bytes: [UInt8] = []
    for employee in employees { rows.append(employee, to: &bytes) }
    return Self.page(written: bytes, nextPageToken: nextPageToken)
  }

  /// A written page's bytes (`WrittenEmployeePage`, its rows' entries as `Rows` wrote them),
  /// then the token when it is not empty.
  static func page(written bytes: [UInt8], nextPageToken: String) -> [UInt8] {
    guard !nextPageToken.isEmpty else { return bytes }
    var bytes = bytes
    Self.appending(Self.stringSize(nextPageToken), to: &bytes) { $0.string(2, nextPageToken) }
    return bytes
  }

  /// Writes each row of a page as it is read, as the `employees = 1` entry `page` writes for
  /// it: the store's bytes go straight into the page's (`SQLiteStore.writtenEmployeePages`).
  struct Rows: EmployeeRowWriter {
    let mask: EmployeeReadMask

    func append(_ row: EmployeeRow, to bytes: inout [UInt8]) {
      EmployeeWire.appendEntry(row, self.mask, to: &bytes)
    }

    func append(_ employee: Employee, to bytes: inout [UInt8]) {
      EmployeeWire.appendEntry(employee, self.mask, to: &bytes)
    }
  }

  /// One `employees = 1` entry: the tag, the length, the employee.
  private static func appendEntry(
    _ employee: some EmployeeWireSource,
    _ mask: EmployeeReadMask,
    to bytes: inout [UInt8]
  ) {
    let size = Self.size(employee, mask)
    Self.appending(1 + Self.varintSize(UInt64(size)) + size, to: &bytes) { writer in
      writer.byte(0x0A)  // field 1, length-delimited
      writer.varint(UInt64(size))
      Self.append(employee, mask, to: &writer)
    }
  }

  /// Appends exactly `size` bytes to `bytes`, which `write` writes.
  private static func appending(
    _ size: Int,
    to bytes: inout [UInt8],
    _ write: (inout Writer) -> Void
  ) {
    let start = bytes.count
    bytes.append(contentsOf: repeatElement(0, count: size))
    bytes.withUnsafeMutableBufferPointer { buffer in
      var writer = Writer(base: buffer.baseAddress! + start, capacity: size)
      write(&writer)
      precondition(
        writer.count == size,
        "EmployeeWire sized \(size) bytes and wrote \(writer.count)"
      )
    }
  }

  /// One employee's bytes (`Employee`, as `GetEmployee` answers), with the fields `mask` selects.
  static func employee(_ employee: Employee, mask: EmployeeReadMask) -> [UInt8] {
    Self.written(size: Self.size(employee, mask)) { writer in
      Self.append(employee, mask, to: &writer)
    }
  }

  /// An array of exactly `size` bytes, which `write` fills.
  private static func written(size: Int, _ write: (inout Writer) -> Void) -> [UInt8] {
    guard size > 0 else { return [] }
    return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
      var writer = Writer(base: buffer.baseAddress!, capacity: size)
      write(&writer)
      precondition(
        writer.count == size,
        "EmployeeWire sized \(size) bytes and wrote \(writer.count)"
      )
      initialized = writer.count
    }
  }

  // MARK: One employee

  /// What `Roster_V1_Employee(employee, mask:)` sets, field by field, in field-number order.
  static func size(_ employee: some EmployeeWireSource, _ mask: EmployeeReadMask) -> Int {
    let fields = mask.fields(for: employee)
    var size = 0
    func text(_ field: EmployeeWireText) -> Int {
      Self.stringSize(count: employee.withText(field) { $0.count })
    }
    // `guid` has no presence: written when not empty; the `optional` strings whenever set.
    if fields.contains(.guid), employee.withText(.guid, { !$0.isEmpty }) { size += text(.guid) }
    if fields.contains(.name) { size += text(.name) }
    if fields.contains(.department) { size += text(.department) }
    if fields.contains(.email) { size += text(.email) }
    if fields.contains(.phone) { size += text(.phone) }
    if fields.contains(.address) { size += text(.address) }
    if fields.contains(.about) { size += text(.about) }
    if fields.contains(.active) { size += 2 }
    if fields.contains(.startDate) { size += text(.startDate) }
    if fields.contains(.vacationDays) {
      size += 1 + Self.varintSize(Self.int32Bits(employee.vacationDays))
    }
    if fields.contains(.thumbnail), let count = employee.withThumbnail({ $0?.count }), count > 0 {
      size += 1 + Self.varintSize(UInt64(count)) + count
    }
    let etag = employee.withText(.pictureEtag) { $0.count }
    if mask.hasPicture, employee.hasPicture { size += 2 }
    if mask.pictureEtag, etag > 0 { size += Self.stringSize(count: etag) }
    if fields.contains(.salesCount), employee.salesCount != 0 {
      size += 1 + Self.varintSize(UInt64(bitPattern: employee.salesCount))
    }
    if fields.contains(.updateTime) {
      let timestamp = Self.timestampSize(employee.updateTimeMillis)
      size += 1 + Self.varintSize(UInt64(timestamp)) + timestamp
    }
    return size
  }

  static func append(
    _ employee: some EmployeeWireSource,
    _ mask: EmployeeReadMask,
    to writer: inout Writer
  ) {
    let fields = mask.fields(for: employee)
    func text(_ number: UInt8, _ field: EmployeeWireText) {
      employee.withText(field) { writer.string(number, $0) }
    }
    if fields.contains(.guid), employee.withText(.guid, { !$0.isEmpty }) { text(1, .guid) }
    if fields.contains(.name) { text(2, .name) }
    if fields.contains(.department) { text(3, .department) }
    if fields.contains(.email) { text(4, .email) }
    if fields.contains(.phone) { text(5, .phone) }
    if fields.contains(.address) { text(6, .address) }
    if fields.contains(.about) { text(7, .about) }
    if fields.contains(.active) {
      writer.byte(8 << 3)
      writer.byte(employee.active ? 1 : 0)
    }
    if fields.contains(.startDate) { text(9, .startDate) }
    if fields.contains(.vacationDays) {
      writer.byte(10 << 3)
      writer.varint(Self.int32Bits(employee.vacationDays))
    }
    if fields.contains(.thumbnail) {
      employee.withThumbnail { thumbnail in
        guard let thumbnail, !thumbnail.isEmpty else { return }
        writer.byte(11 << 3 | 2)
        writer.varint(UInt64(thumbnail.count))
        writer.bytes(thumbnail)
      }
    }
    if mask.hasPicture, employee.hasPicture {
      writer.byte(12 << 3)
      writer.byte(1)
    }
    if mask.pictureEtag, employee.withText(.pictureEtag, { !$0.isEmpty }) { text(13, .pictureEtag) }
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
    Self.stringSize(count: value.utf8.count)
  }

  /// A string field of `count` UTF-8 bytes: its tag, length and bytes.
  private static func stringSize(count: Int) -> Int {
    1 + Self.varintSize(UInt64(count)) + count
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
      precondition(
        source.count <= self.capacity - self.count,
        "EmployeeWire wrote past the size it computed"
      )
      (self.base + self.count).initialize(from: start, count: source.count)
      self.count += source.count
    }

    /// A string field's tag, length and UTF-8 bytes.
    mutating func string(_ field: UInt8, _ value: String) {
      var value = value
      value.withUTF8 { self.string(field, $0) }
    }

    /// A string field's tag, length and UTF-8 bytes, from the bytes.
    mutating func string(_ field: UInt8, _ utf8: UnsafeBufferPointer<UInt8>) {
      self.byte(field << 3 | 2)
      self.varint(UInt64(utf8.count))
      self.bytes(utf8)
    }
  }
}

/// The text fields `EmployeeWire` reads from an `EmployeeWireSource`.
enum EmployeeWireText: CaseIterable {
  case guid, name, department, email, phone, address, about, startDate, pictureEtag
}

/// What `EmployeeWire` writes an employee from: an `Employee`, or a row while the store reads it
/// (`EmployeeRow`), each text as its UTF-8 bytes.
protocol EmployeeWireSource {
  /// Runs `body` with a text field's UTF-8 bytes (none for a picture etag there is not).
  func withText<Result>(
    _ field: EmployeeWireText,
    _ body: (UnsafeBufferPointer<UInt8>) -> Result
  ) -> Result
  /// Runs `body` with the thumbnail's bytes, nil when there is none.
  func withThumbnail<Result>(_ body: (UnsafeBufferPointer<UInt8>?) -> Result) -> Result
  var active: Bool { get }
  var vacationDays: Int { get }
  /// Whether the employee has a picture (a picture etag, which may be empty).
  var hasPicture: Bool { get }
  var salesCount: Int64 { get }
  var updateTimeMillis: Int64 { get }
}

extension Employee: EmployeeWireSource {
  func withText<Result>(
    _ field: EmployeeWireText,
    _ body: (UnsafeBufferPointer<UInt8>) -> Result
  ) -> Result {
    var text =
      switch field {
      case .guid: self.guid
      case .name: self.name
      case .department: self.department
      case .email: self.email
      case .phone: self.phone
      case .address: self.address
      case .about: self.about
      case .startDate: self.startDate
      case .pictureEtag: self.pictureEtag ?? ""
      }
    return text.withUTF8(body)
  }

  func withThumbnail<Result>(_ body: (UnsafeBufferPointer<UInt8>?) -> Result) -> Result {
    guard let thumbnail = self.thumbnail else { return body(nil) }
    return thumbnail.withUnsafeBufferPointer(body)
  }

  var hasPicture: Bool { self.pictureEtag != nil }
}

extension EmployeeRow: EmployeeWireSource {
  func withText<Result>(
    _ field: EmployeeWireText,
    _ body: (UnsafeBufferPointer<UInt8>) -> Result
  ) -> Result {
    switch field {
    case .guid: body(self.guid)
    case .name: body(self.name)
    case .department: body(self.department)
    case .email: body(self.email)
    case .phone: body(self.phone)
    case .address: body(self.address)
    case .about: body(self.about)
    case .startDate: body(self.startDate)
    case .pictureEtag: body(self.pictureEtag ?? UnsafeBufferPointer(start: nil, count: 0))
    }
  }

  func withThumbnail<Result>(_ body: (UnsafeBufferPointer<UInt8>?) -> Result) -> Result {
    body(self.thumbnail)
  }

  var hasPicture: Bool { self.pictureEtag != nil }
}
