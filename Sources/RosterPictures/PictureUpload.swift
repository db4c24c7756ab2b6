internal import Foundation
internal import RosterDomain
internal import RosterImaging
internal import RosterStore

#if canImport(Glibc)
internal import Glibc
#endif

/// One picture upload in progress: bytes go to a temporary file and a running hash as they
/// arrive. `finish` checks, thumbnails and commits; anything else (an error, a cancelled
/// client, `abandon`, or the upload simply going away) removes the temporary file.
final class PictureUpload<Catalog: PictureCatalog>: PictureUploading {
  private let storage: PictureStorage
  private let catalog: Catalog
  private let guid: String
  private let declaredType: String
  private let declaredSize: Int64
  private let temporary: String
  private var descriptor: Int32
  private var hasher: SHA256Hasher? = SHA256Hasher()
  private var head: [UInt8] = []
  /// Bytes received so far.
  private(set) var size: Int64 = 0

  init(
    storage: PictureStorage,
    catalog: Catalog,
    guid: String,
    contentType: String,
    totalSize: Int64
  ) throws {
    self.storage = storage
    self.catalog = catalog
    self.guid = guid
    self.declaredType = contentType
    self.declaredSize = totalSize
    let (path, descriptor) = try storage.files.createTemporary()
    storage.registry.adopt(temporary: path)
    self.temporary = path
    self.descriptor = descriptor
  }

  deinit {
    self.abandon()
  }

  /// Appends the next bytes.
  ///
  /// - Throws: `resourceExhausted` the moment the picture crosses the size limit.
  func append(_ chunk: Data) async throws {
    guard self.descriptor >= 0 else {
      throw StoreError(.invalidArgument, "the upload is already over")
    }
    let limit = self.storage.configuration.maximumBytes
    if self.size + Int64(chunk.count) > limit {
      self.abandon()
      throw StoreError(
        .resourceExhausted,
        "picture is over the \(limit)-byte limit (\(self.size + Int64(chunk.count)) bytes so far)"
      )
    }
    if self.head.count < 16 { self.head += chunk.prefix(16 - self.head.count) }
    chunk.withUnsafeBytes { self.hasher?.update($0) }
    self.size += Int64(chunk.count)
    let descriptor = self.descriptor
    try await StoreTracing.withSpan("picture.write") {
      try await self.storage.io.run {
        try chunk.withUnsafeBytes { try PictureFiles.write(descriptor: descriptor, $0) }
      }
    }
  }

  /// Checks the picture, makes its thumbnail, stores it and commits the row.
  ///
  /// - Throws: `invalidArgument` for an empty picture, a size that does not match
  ///   `total_size`, bytes that are not JPEG or PNG, a mismatched `content_type`, or a
  ///   picture libvips cannot decode; `notFound` if the employee went away meanwhile.
  func finish(context: WriteContext) async throws -> StoredPicture {
    defer { self.abandon() }
    guard self.descriptor >= 0, let hasher = self.hasher.take() else {
      throw StoreError(.invalidArgument, "the upload is already over")
    }
    let etag = hasher.finish()
    if self.size == 0 {
      throw StoreError(.invalidArgument, "picture is empty: send its bytes as chunks")
    }
    if self.declaredSize != 0 && self.declaredSize != self.size {
      throw StoreError(
        .invalidArgument,
        "total_size \(self.declaredSize) does not match the \(self.size) bytes sent"
      )
    }
    guard let contentType = PictureFormat.sniff(self.head) else {
      throw StoreError(.invalidArgument, "picture is not a JPEG or PNG image")
    }
    if !self.declaredType.isEmpty && self.declaredType != contentType {
      throw StoreError(
        .invalidArgument,
        "content_type '\(self.declaredType)' does not match the picture, which is \(contentType)"
      )
    }
    let made: (StoredThumbnail, width: Int, height: Int)
    if let existing = try await self.catalog.existingThumbnail(etag: etag) {
      made = existing
    } else {
      do {
        let thumbnail = try await StoreTracing.withSpan("picture.thumbnail") {
          try await self.storage.thumbnail(path: self.temporary)
        }
        made = (
          StoredThumbnail(
            data: thumbnail.data,
            etag: etag,
            width: thumbnail.width,
            height: thumbnail.height
          ),
          thumbnail.sourceWidth,
          thumbnail.sourceHeight
        )
      } catch {
        self.storage.logger.info("picture refused by libvips", metadata: ["reason": "\(error)"])
        throw StoreError(.invalidArgument, "picture could not be decoded as \(contentType)")
      }
    }
    let info = PictureInfo(
      etag: etag,
      size: self.size,
      contentType: contentType,
      width: made.width,
      height: made.height
    )
    let staged = StagedPicture(
      path: self.temporary,
      descriptor: self.descriptor,
      io: self.storage.io,
      etag: etag,
      size: self.size
    )
    try await self.catalog.storePicture(
      staged,
      guid: self.guid,
      info: info,
      thumbnail: made.0,
      context: context
    )
    return StoredPicture(info: info, thumbnail: made.0)
  }

  /// Stops the upload and removes its temporary file. Safe to call more than once.
  func abandon() {
    guard self.descriptor >= 0 else { return }
    close(self.descriptor)
    self.descriptor = -1
    unlink(self.temporary)
    self.storage.registry.release(temporary: self.temporary)
    self.hasher = nil
  }
}

/// The picture formats Roster takes, known by their first bytes.
enum PictureFormat {
  static let contentTypes: Set = ["image/jpeg", "image/png"]

  /// The content type the first bytes announce: JPEG or PNG, or nil.
  static func sniff(_ head: [UInt8]) -> String? {
    if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
    if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
    return nil
  }
}
