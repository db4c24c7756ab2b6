internal import Foundation
internal import RosterDomain
internal import RosterImaging
internal import RosterStore

/// Reads a picture's bytes, from memory or from its file, for `withPicture`.
struct PictureReader: PictureReading {
  enum Source: Sendable {
    case memory([UInt8])
    case file(descriptor: Int32, pool: BlockingPool)
  }
  let source: Source

  /// Up to `count` bytes from `offset`; fewer only at the end.
  public func read(offset: Int64, count: Int) async throws -> Data {
    switch self.source {
    case .memory(let bytes):
      let start = Int(min(offset, Int64(bytes.count)))
      return Data(bytes[start ..< min(bytes.count, start + count)])
    case .file(let descriptor, let pool):
      return try await pool.run {
        try PictureFiles.read(descriptor: descriptor, offset: offset, count: count)
      }
    }
  }
}
