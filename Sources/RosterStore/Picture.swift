public import Foundation

/// A stored picture's description.
public struct PictureInfo: Sendable, Hashable {
  /// SHA-256 of the bytes, in hex.
  public var etag: String
  /// Size in bytes.
  public var size: Int64
  /// `image/jpeg` or `image/png`, from the bytes themselves.
  public var contentType: String
  /// Width in pixels.
  public var width: Int
  /// Height in pixels.
  public var height: Int
}

/// An employee's thumbnail.
public struct StoredThumbnail: Sendable, Hashable {
  /// The JPEG bytes.
  public var data: [UInt8]
  /// The etag of the picture it was made from.
  public var etag: String
  /// Width in pixels.
  public var width: Int
  /// Height in pixels.
  public var height: Int
}

/// What a finished upload stored.
public struct StoredPicture: Sendable, Hashable {
  /// The picture.
  public var info: PictureInfo
  /// Its new thumbnail.
  public var thumbnail: StoredThumbnail
}

/// Reads a picture's bytes, from memory or from its file, for `withPicture`.
public struct PictureReader: Sendable {
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
      return Data(bytes[start..<min(bytes.count, start + count)])
    case .file(let descriptor, let pool):
      return try await pool.run {
        try PictureFiles.read(descriptor: descriptor, offset: offset, count: count)
      }
    }
  }
}
