public import Foundation

/// A file format that `MappedBatches` reads a batch at a time.
public protocol BatchFormat {
  associatedtype Row: Sendable
  /// Where parsing goes on from.
  associatedtype Cursor: Sendable
  /// The cursor at the start of a file.
  static var start: Cursor { get }
  /// Parses up to `limit` rows from `cursor`, moving it past them; none at the end.
  static func parse(
    _ bytes: UnsafeBufferPointer<UInt8>,
    cursor: inout Cursor,
    limit: Int
  ) throws -> [Row]
  /// The byte offset `cursor` has parsed up to.
  static func offset(_ cursor: Cursor) -> Int
}

/// Gives the pages of a mapped file before `offset` back (`MADV_DONTNEED`): parsed, they are
/// not read again, and a file read through to its end would otherwise stay resident, counted
/// in the process's RSS, however long it is. `released` is how far the pages went already.
func releaseParsed(_ raw: UnsafeRawBufferPointer, upTo offset: Int, released: inout Int) {
  let page = Int(sysconf(Int32(_SC_PAGESIZE)))
  guard let base = raw.baseAddress, Int(bitPattern: base) % page == 0 else { return }
  let end = offset / page * page
  guard end - released >= 64 * page else { return }
  _ = madvise(UnsafeMutableRawPointer(mutating: base + released), end - released, MADV_DONTNEED)
  released = end
}

/// The rows of a memory-mapped file in batches, parsed a batch at a time, as an async
/// sequence: memory holds one batch whatever the file's size.
public struct MappedBatches<Format: BatchFormat>: AsyncSequence, Sendable {
  public typealias Element = [Format.Row]
  let data: Data
  let size: Int

  /// Maps the file at `path`; batches of `size` rows.
  init(path: String, size: Int) throws {
    self.data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
    self.size = Swift.max(1, size)
  }

  public func makeAsyncIterator() -> Iterator {
    Iterator(data: self.data, size: self.size, cursor: Format.start)
  }

  /// Parses the next batch, and gives back the pages of the ones before.
  public struct Iterator: AsyncIteratorProtocol {
    let data: Data
    let size: Int
    var cursor: Format.Cursor
    var released = 0

    init(data: Data, size: Int, cursor: Format.Cursor) {
      self.data = data
      self.size = size
      self.cursor = cursor
    }

    public mutating func next() async throws -> [Format.Row]? {
      var cursor = self.cursor
      var released = self.released
      let size = self.size
      let rows = try self.data.withUnsafeBytes { raw in
        releaseParsed(raw, upTo: Format.offset(self.cursor), released: &released)
        return try Format.parse(raw.bindMemory(to: UInt8.self), cursor: &cursor, limit: size)
      }
      self.cursor = cursor
      self.released = released
      return rows.isEmpty ? nil : rows
    }
  }
}
