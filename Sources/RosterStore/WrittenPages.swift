public import RosterDomain

/// One row of a listing while the store reads it: the fields a read asked for, each text as
/// the UTF-8 bytes the store holds for it. The bytes belong to the store and are valid only
/// during the call that is given the row (`EmployeeRowWriter.append(_:to:)`); fields not read
/// are empty.
public struct EmployeeRow {
  public var id: Int64 = 0
  public var guid = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var name = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var department = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var email = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var phone = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var address = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var about = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var active = false
  public var startDate = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
  public var vacationDays = 0
  /// The thumbnail's bytes; nil when there is none (or it was not read).
  public var thumbnail: UnsafeBufferPointer<UInt8>? = nil
  /// The picture's content hash; nil when there is no picture (or it was not read).
  public var pictureEtag: UnsafeBufferPointer<UInt8>? = nil
  public var salesCount: Int64 = 0
  public var updateTimeMillis: Int64 = 0

  public init() {}
}

extension EmployeeRow {
  /// Whether every text of the row is valid UTF-8, as protobuf's strings must be. SQLite keeps
  /// whatever bytes a text was given (another tool may write the file); a row that fails is
  /// written from `Employee(row)`, whose Strings repair it, as every other read does.
  public var textIsValidUTF8: Bool {
    Self.isValidUTF8(self.guid) && Self.isValidUTF8(self.name) && Self.isValidUTF8(self.department)
      && Self.isValidUTF8(self.email) && Self.isValidUTF8(self.phone)
      && Self.isValidUTF8(self.address)
      && Self.isValidUTF8(self.about) && Self.isValidUTF8(self.startDate)
      && self.pictureEtag.map(Self.isValidUTF8) ?? true
  }

  /// Whether `bytes` are UTF-8 (the well-formed sequences of the Unicode Standard's table 3-7):
  /// ASCII eight bytes at a time, each other sequence by its lead byte's ranges.
  static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = bytes.baseAddress else { return true }
    let raw = UnsafeRawPointer(base)
    let count = bytes.count
    // Most texts are ASCII: their words ORed together, the last one overlapping, then one test.
    if count >= 8 {
      var any: UInt64 = raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
      var offset = 0
      while offset + 8 <= count {
        any |= raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        offset += 8
      }
      if any & 0x8080_8080_8080_8080 == 0 { return true }
    } else if bytes.allSatisfy({ $0 < 0x80 }) {
      return true
    }
    var index = 0
    func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80 ... 0xBF) -> Bool {
      index + offset < count && range.contains(base[index + offset])
    }
    while index < count {
      if index + 8 <= count,
        raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
      {
        index += 8
        continue
      }
      let lead = base[index]
      let length: Int
      switch lead {
      case 0x00 ... 0x7F: length = 1
      case 0xC2 ... 0xDF: length = continuation(1) ? 2 : 0
      case 0xE0: length = continuation(1, 0xA0 ... 0xBF) && continuation(2) ? 3 : 0
      case 0xE1 ... 0xEC, 0xEE ... 0xEF: length = continuation(1) && continuation(2) ? 3 : 0
      case 0xED: length = continuation(1, 0x80 ... 0x9F) && continuation(2) ? 3 : 0
      case 0xF0:
        length = continuation(1, 0x90 ... 0xBF) && continuation(2) && continuation(3) ? 4 : 0
      case 0xF1 ... 0xF3: length = continuation(1) && continuation(2) && continuation(3) ? 4 : 0
      case 0xF4:
        length = continuation(1, 0x80 ... 0x8F) && continuation(2) && continuation(3) ? 4 : 0
      default: length = 0
      }
      guard length > 0 else { return false }
      index += length
    }
    return true
  }
}

/// Writes the rows of a listing into a page's bytes as the store reads them, so that no
/// `Employee` is made for a row that is only sent on (the services' protobuf encoder).
public protocol EmployeeRowWriter: Sendable {
  /// Appends a row as the store reads it.
  func append(_ row: EmployeeRow, to bytes: inout [UInt8])
  /// Appends an employee read as a value (a backend that decodes its rows into `Employee`s).
  func append(_ employee: Employee, to bytes: inout [UInt8])
}

/// A page of a listing as an `EmployeeRowWriter` wrote it: its rows' bytes, one after another.
public struct WrittenEmployeePage: KeysetPage {
  /// What the writer appended for each row, in order.
  public var bytes: [UInt8] = []
  public private(set) var rowCount = 0
  public var next: EmployeeCursor?

  /// Every page starts with room for this many bytes a row (a row of every field but the
  /// thumbnail is about 300; the array grows past it as usual).
  static let bytesPerRow = 320

  public init(reserving limit: Int) {
    self.bytes.reserveCapacity(limit * Self.bytesPerRow)
  }

  /// Counts a row whose bytes the writer has appended to `bytes`.
  public mutating func append(_ row: Void) {
    self.rowCount += 1
  }
}

/// `KeysetPages` of written rows: `write` appends each row to the current page's bytes.
extension KeysetPages where Page == WrittenEmployeePage {
  public mutating func append(
    id: Int64,
    keys: () throws -> [String],
    write: (inout [UInt8]) -> Void
  ) rethrows {
    self.withCurrentPage { write(&$0.bytes) }
    try self.append((), id: id, keys: keys)
  }
}

extension Employee {
  /// The employee a row holds, its texts copied out of the store's bytes.
  public init(_ row: EmployeeRow) {
    self.init()
    self.id = row.id
    self.guid = String(decoding: row.guid, as: UTF8.self)
    self.name = String(decoding: row.name, as: UTF8.self)
    self.department = String(decoding: row.department, as: UTF8.self)
    self.email = String(decoding: row.email, as: UTF8.self)
    self.phone = String(decoding: row.phone, as: UTF8.self)
    self.address = String(decoding: row.address, as: UTF8.self)
    self.about = String(decoding: row.about, as: UTF8.self)
    self.active = row.active
    self.startDate = String(decoding: row.startDate, as: UTF8.self)
    self.vacationDays = row.vacationDays
    self.thumbnail = row.thumbnail.map { [UInt8]($0) }
    self.pictureEtag = row.pictureEtag.map { String(decoding: $0, as: UTF8.self) }
    self.salesCount = row.salesCount
    self.updateTimeMillis = row.updateTimeMillis
  }
}
