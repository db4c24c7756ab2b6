internal import Foundation
public import RosterDomain

/// Reads and writes `sales.csv`: a header line `employee_guid,amount,date`, then one sale per
/// line, the amount in currency units with up to two decimals (`1234.50`), read into integer
/// cents exactly.
///
/// `roster seed --sales-per-employee` writes it beside `seed.json`, and `roster import` loads
/// it after the employees. Both directions stream, so ten million sales take little memory.
public enum SalesFile {
  /// The header line, without its newline.
  public static let header = "employee_guid,amount,date"

  /// The default sales file for a seed file: `sales.csv` beside it.
  public static func path(beside seedPath: String) -> String {
    URL(fileURLWithPath: seedPath).deletingLastPathComponent().appendingPathComponent("sales.csv")
      .path
  }

  /// Writes `sales` to `path`, replacing it.
  ///
  /// - Returns: how many sales were written.
  @discardableResult
  public static func write(_ sales: some Sequence<SaleRow>, to path: String) throws -> Int {
    guard FileManager.default.createFile(atPath: path, contents: nil) else {
      throw StoreError(.invalidArgument, "cannot create '\(path)'")
    }
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    var buffer = Self.header + "\n"
    var count = 0
    for sale in sales {
      buffer +=
        sale.employeeGUID + "," + Self.amountText(cents: sale.amountCents) + "," + sale.date + "\n"
      count += 1
      if buffer.utf8.count > 1 << 20 {
        try handle.write(contentsOf: Data(buffer.utf8))
        buffer.removeAll(keepingCapacity: true)
      }
    }
    try handle.write(contentsOf: Data(buffer.utf8))
    return count
  }

  /// The sales of the file at `path` in batches of `size`, as `SQLiteStore.importSales` takes
  /// them. The file is memory-mapped and parsed a batch at a time.
  ///
  /// Fields are taken as written; `importSales` checks them and rejects bad rows by index. A
  /// line without three fields, or an amount that is not a number, throws
  /// `StoreError.invalidArgument` naming the line.
  public static func batches(_ path: String, size: Int = 5_000) throws -> Batches {
    try Batches(path: path, size: size)
  }

  /// Batches of a sales file; see `batches(_:size:)`.
  public typealias Batches = MappedBatches<SalesFile>

  /// Parses up to `limit` sales from `position`; returns them with where to go on.
  static func parse(
    _ bytes: UnsafeBufferPointer<UInt8>,
    from start: Int,
    line startLine: Int,
    limit: Int
  ) throws -> ([SaleRow], Int, Int) {
    var rows: [SaleRow] = []
    rows.reserveCapacity(limit)
    var position = start
    var line = startLine
    while rows.count < limit, position < bytes.count {
      var end = position
      while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
      var stop = end
      if stop > position, bytes[stop - 1] == UInt8(ascii: "\r") { stop -= 1 }
      let text = String(
        decoding: UnsafeBufferPointer(rebasing: bytes[position ..< stop]),
        as: UTF8.self
      )
      position = end + 1
      line += 1
      if text.isEmpty || (line == 1 && text == Self.header) { continue }
      let fields = text.split(separator: ",", omittingEmptySubsequences: false)
      guard fields.count == 3, let cents = Self.cents(fields[1]) else {
        throw StoreError(
          .invalidArgument,
          "line \(line): expected employee_guid,amount,date with an amount of at most two decimals"
        )
      }
      rows.append(
        SaleRow(employeeGUID: String(fields[0]), amountCents: cents, date: String(fields[2]))
      )
    }
    return (rows, position, line)
  }

  /// `cents` as the file writes it: currency units with two decimals (`1234.50`, `-0.05`).
  static func amountText(cents: Int64) -> String {
    let sign = cents < 0 ? "-" : ""
    let units = cents.magnitude / 100
    let fraction = cents.magnitude % 100
    return sign + String(units) + (fraction < 10 ? ".0" : ".") + String(fraction)
  }

  /// The cents of an amount written in currency units with at most two decimals (`12`,
  /// `12.5`, `12.50`, `-3.05`), exactly, with no floating point; nil for anything else
  /// (an exponent, a third decimal, more than 15 digits before the point).
  static func cents(_ text: Substring) -> Int64? {
    var utf8 = text.utf8[...]
    let negative = utf8.first == UInt8(ascii: "-")
    if negative { utf8 = utf8.dropFirst() }
    let point = utf8.firstIndex(of: UInt8(ascii: "."))
    let whole = point.map { utf8[..<$0] } ?? utf8
    let decimals = point.map { utf8[utf8.index(after: $0)...] } ?? utf8[utf8.endIndex...]
    guard (1 ... 15).contains(whole.count), decimals.count <= 2, point == nil || !decimals.isEmpty
    else {
      return nil
    }
    var value: Int64 = 0
    for byte in whole {
      guard (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(byte) else { return nil }
      value = value * 10 + Int64(byte - UInt8(ascii: "0"))
    }
    var scale = 0
    for byte in decimals {
      guard (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(byte) else { return nil }
      value = value * 10 + Int64(byte - UInt8(ascii: "0"))
      scale += 1
    }
    for _ in scale ..< 2 { value *= 10 }
    return negative ? -value : value
  }
}

extension SalesFile: BatchFormat {
  public static var start: (position: Int, line: Int) { (0, 0) }
  public static func offset(_ cursor: (position: Int, line: Int)) -> Int { cursor.position }

  public static func parse(
    _ bytes: UnsafeBufferPointer<UInt8>,
    cursor: inout (position: Int, line: Int),
    limit: Int
  ) throws -> [SaleRow] {
    let (rows, position, line) = try Self.parse(
      bytes,
      from: cursor.position,
      line: cursor.line,
      limit: limit
    )
    cursor = (position, line)
    return rows
  }
}
