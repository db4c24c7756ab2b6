internal import Foundation
public import RosterDomain

/// Reads and writes the `seed.json` format: a JSON array of flat employee objects.
///
/// Both directions stream: the writer never holds the file in memory, and the reader walks a
/// memory-mapped file with a small byte parser (no Codable), so a million records load fast.
public enum SeedFile {
  /// Writes `records` as a JSON array, one object per line.
  public static func write(_ records: some Sequence<SeedRecord>, to path: String) throws {
    guard FileManager.default.createFile(atPath: path, contents: nil) else {
      throw StoreError(.invalidArgument, "cannot create '\(path)'")
    }
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    var buffer = "[\n"
    var first = true
    for record in records {
      if !first { buffer += ",\n" }
      first = false
      Self.append(record, to: &buffer)
      if buffer.utf8.count > 1 << 20 {
        try handle.write(contentsOf: Data(buffer.utf8))
        buffer.removeAll(keepingCapacity: true)
      }
    }
    buffer += "\n]\n"
    try handle.write(contentsOf: Data(buffer.utf8))
  }

  /// Calls `body` with each record of the file at `path`, in file order.
  ///
  /// - Throws: `StoreError.invalidArgument` naming the byte offset of malformed JSON.
  public static func read(_ path: String, _ body: (SeedRecord) throws -> Void) throws {
    let data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
    try data.withUnsafeBytes { raw in
      var parser = SeedParser(bytes: raw.bindMemory(to: UInt8.self))
      try parser.readArray(body)
    }
  }

  /// The records of the file at `path` in batches of `size`, as an async sequence of upsert
  /// rows: what `upsertEmployees` takes. The file is memory-mapped and parsed a batch at a
  /// time, so memory holds one batch whatever the file's size.
  public static func batches(_ path: String, size: Int = 1_000) throws -> Batches {
    try Batches(path: path, size: size)
  }

  /// Batches of a seed file; see `batches(_:size:)`.
  public typealias Batches = MappedBatches<SeedFile>

  /// The default pictures directory for a seed file: `pictures` beside it.
  public static func picturesDirectory(beside path: String) -> String {
    URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("pictures").path
  }

  /// Where a record's `picture` name points. Only the last path component counts, so a
  /// seed file cannot reach outside its pictures directory.
  public static func picturePath(_ name: String, in directory: String) -> String {
    directory + "/" + URL(fileURLWithPath: name).lastPathComponent
  }

  /// All records of the file at `path`, for small files and tests.
  public static func readAll(_ path: String) throws -> [SeedRecord] {
    var records: [SeedRecord] = []
    try self.read(path) { records.append($0) }
    return records
  }

  private static func append(_ record: SeedRecord, to out: inout String) {
    let e = record.employee
    // Keys in the sample's order; nil values are written as JSON literals.
    let fields: [(String, String?, literal: String)] = [
      ("guid", e.guid, ""), ("active", nil, "\(e.active)"), ("picture", record.picture, "null"),
      ("name", e.name, ""), ("vacationDays", nil, "\(e.vacationDays)"),
      ("department", e.department, ""), ("startDate", e.startDate, ""), ("email", e.email, ""),
      ("phone", e.phone, ""), ("address", e.address, ""), ("about", e.about, ""),
    ]
    out += "{"
    for (index, (key, text, literal)) in fields.enumerated() {
      out += index == 0 ? "\"\(key)\":" : ",\"\(key)\":"
      if let text { self.appendString(text, to: &out) } else { out += literal }
    }
    out += "}"
  }

  private static func appendString(_ value: String, to out: inout String) {
    out += "\""
    for scalar in value.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case _ where scalar.value < 0x20:
        out +=
          "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
          + String(scalar.value, radix: 16)
      default: out.unicodeScalars.append(scalar)
      }
    }
    out += "\""
  }
}

extension SeedFile: BatchFormat {
  public static var start: (position: Int, atEnd: Bool) { (0, false) }
  public static func offset(_ cursor: (position: Int, atEnd: Bool)) -> Int { cursor.position }

  public static func parse(
    _ bytes: UnsafeBufferPointer<UInt8>,
    cursor: inout (position: Int, atEnd: Bool),
    limit: Int
  ) throws -> [UpsertRow] {
    var parser = SeedParser(bytes: bytes, position: cursor.position)
    let records = try parser.readRecords(limit: limit, atEnd: &cursor.atEnd)
    cursor.position = parser.position
    return records.map {
      UpsertRow(guid: $0.employee.guid, changes: EmployeeChanges(setting: $0.employee))
    }
  }
}

extension SeedFile {
  /// The pictures the records of the file at `path` name, with their paths in `directory`,
  /// in batches as an async sequence: the file is memory-mapped and parsed a batch of records
  /// at a time, so memory holds one batch whatever the file's size. Records with no picture,
  /// or with a guid that is not a UUID (the employees' load refuses those), are passed over.
  public static func pictures(
    _ path: String,
    in directory: String,
    size: Int = 1_000
  ) throws
    -> Pictures
  {
    Pictures(
      data: try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped),
      directory: directory,
      size: Swift.max(1, size)
    )
  }

  /// Batches of a seed file's pictures; see `pictures(_:in:size:)`.
  public struct Pictures: AsyncSequence, Sendable {
    public typealias Element = [PictureFile]
    let data: Data
    let directory: String
    let size: Int

    public func makeAsyncIterator() -> Iterator {
      Iterator(pictures: self)
    }

    /// Parses records until a batch holds a picture, or the file ends.
    public struct Iterator: AsyncIteratorProtocol {
      let pictures: Pictures
      var position = 0
      var atEnd = false
      var released = 0

      public mutating func next() async throws -> [PictureFile]? {
        while !self.atEnd {
          var position = self.position
          var atEnd = self.atEnd
          var released = self.released
          let (size, directory) = (self.pictures.size, self.pictures.directory)
          let files = try self.pictures.data.withUnsafeBytes { raw -> [PictureFile]? in
            releaseParsed(raw, upTo: position, released: &released)
            var parser = SeedParser(bytes: raw.bindMemory(to: UInt8.self), position: position)
            let records = try parser.readRecords(limit: size, atEnd: &atEnd)
            position = parser.position
            if records.isEmpty { return nil }
            return records.compactMap { record in
              guard let name = record.picture,
                let guid = EmployeeValidation.canonicalGUID(record.employee.guid)
              else { return nil }
              return PictureFile(guid: guid, path: SeedFile.picturePath(name, in: directory))
            }
          }
          self.position = position
          self.atEnd = atEnd
          self.released = released
          guard let files else { return nil }
          if !files.isEmpty { return files }
        }
        return nil
      }
    }
  }
}
