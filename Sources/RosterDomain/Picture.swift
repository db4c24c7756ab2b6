internal import Foundation

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

  /// Creates a value from its parts.
  public init(etag: String, size: Int64, contentType: String, width: Int, height: Int) {
    self.etag = etag
    self.size = size
    self.contentType = contentType
    self.width = width
    self.height = height
  }
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

  /// Creates a value from its parts.
  public init(data: [UInt8], etag: String, width: Int, height: Int) {
    self.data = data
    self.etag = etag
    self.width = width
    self.height = height
  }
}

/// What a finished upload stored.
public struct StoredPicture: Sendable, Hashable {
  /// The picture.
  public var info: PictureInfo
  /// Its new thumbnail.
  public var thumbnail: StoredThumbnail

  /// Creates a value from its parts.
  public init(info: PictureInfo, thumbnail: StoredThumbnail) {
    self.info = info
    self.thumbnail = thumbnail
  }
}

/// A picture file to store as an employee's picture.
public struct PictureFile: Sendable, Hashable {
  /// The employee's guid.
  public var guid: String
  /// Where the file is.
  public var path: String

  public init(guid: String, path: String) {
    self.guid = guid
    self.path = path
  }
}
