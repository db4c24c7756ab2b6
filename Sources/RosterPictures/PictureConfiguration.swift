/// How full pictures are stored and served.
public struct PictureConfiguration: Sendable {
  /// The directory for picture files; nil means the backend's default (for SQLite,
  /// `<database path>-pictures`).
  public var directory: String? = nil
  /// Pictures up to this size live in the database; larger ones are files. SQLite's own
  /// study of BLOBs puts the crossover near 100 KB.
  public var inlineMaximumBytes: Int = 100 * 1024
  /// The largest picture accepted; an upload is stopped the moment it crosses this.
  public var maximumBytes: Int64 = 50 * 1024 * 1024
  /// Bytes of hot pictures kept in memory.
  public var cacheBytes: Int = 64 * 1024 * 1024
  /// Thumbnail height in pixels.
  public var thumbnailHeight: Int = 120
  /// Thumbnail JPEG quality.
  public var thumbnailQuality: Int = 80
  /// Thumbnails made at once, each on a thread of its own, off the request threads.
  public var thumbnailConcurrency: Int = 2

  /// Creates the default picture configuration.
  public init() {}
}
