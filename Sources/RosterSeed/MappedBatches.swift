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

  /// Parses the next batch.
  public struct Iterator: AsyncIteratorProtocol {
    let data: Data
    let size: Int
    var cursor: Format.Cursor

    public mutating func next() async throws -> [Format.Row]? {
      var cursor = self.cursor
      let size = self.size
      let rows = try self.data.withUnsafeBytes { raw in
        try Format.parse(raw.bindMemory(to: UInt8.self), cursor: &cursor, limit: size)
      }
      self.cursor = cursor
      return rows.isEmpty ? nil : rows
    }
  }
}
