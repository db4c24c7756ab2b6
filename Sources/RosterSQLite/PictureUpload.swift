public import RosterDomain
public import RosterStore
public import Foundation
internal import GRDB
internal import Logging
internal import RosterImaging

#if canImport(Glibc)
  internal import Glibc
#endif

/// One picture upload in progress: bytes go to a temporary file and a running hash as they
/// arrive. `finish` checks, thumbnails and commits; anything else (an error, a cancelled
/// client, `abandon`, or the upload simply going away) removes the temporary file.
public final class PictureUpload: PictureUploading {
  static let contentTypes: Set = ["image/jpeg", "image/png"]

  private let store: SQLiteStore
  private let guid: String
  private let declaredType: String
  private let declaredSize: Int64
  private let temporary: String
  private var descriptor: Int32
  private var hasher: SHA256Hasher? = SHA256Hasher()
  private var head: [UInt8] = []
  /// Bytes received so far.
  public private(set) var size: Int64 = 0

  init(store: SQLiteStore, guid: String, contentType: String, totalSize: Int64) throws {
    self.store = store
    self.guid = guid
    self.declaredType = contentType
    self.declaredSize = totalSize
    let (path, descriptor) = try store.pictureFiles.createTemporary()
    store.pictureRegistry.adopt(temporary: path)
    self.temporary = path
    self.descriptor = descriptor
  }

  deinit {
    self.abandon()
  }

  /// Appends the next bytes.
  ///
  /// - Throws: `resourceExhausted` the moment the picture crosses the size limit.
  public func append(_ chunk: Data) async throws {
    guard self.descriptor >= 0 else { throw StoreError(.invalidArgument, "the upload is already over") }
    let limit = self.store.configuration.pictures.maximumBytes
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
    try await self.store.io.run {
      try chunk.withUnsafeBytes { try PictureFiles.write(descriptor: descriptor, $0) }
    }
  }

  /// Checks the picture, makes its thumbnail, stores it and commits the row.
  ///
  /// - Throws: `invalidArgument` for an empty picture, a size that does not match
  ///   `total_size`, bytes that are not JPEG or PNG, a mismatched `content_type`, or a
  ///   picture libvips cannot decode; `notFound` if the employee went away meanwhile.
  public func finish(context: WriteContext = WriteContext()) async throws -> StoredPicture {
    defer { self.abandon() }
    guard self.descriptor >= 0, let hasher = self.hasher.take() else {
      throw StoreError(.invalidArgument, "the upload is already over")
    }
    let etag = hasher.finish()
    if self.size == 0 { throw StoreError(.invalidArgument, "picture is empty: send its bytes as chunks") }
    if self.declaredSize != 0 && self.declaredSize != self.size {
      throw StoreError(
        .invalidArgument,
        "total_size \(self.declaredSize) does not match the \(self.size) bytes sent"
      )
    }
    guard let contentType = Self.sniff(self.head) else {
      throw StoreError(.invalidArgument, "picture is not a JPEG or PNG image")
    }
    if !self.declaredType.isEmpty && self.declaredType != contentType {
      throw StoreError(
        .invalidArgument,
        "content_type '\(self.declaredType)' does not match the picture, which is \(contentType)"
      )
    }
    let store = self.store
    let pictures = store.configuration.pictures
    let path = self.temporary
    let made: (StoredThumbnail, width: Int, height: Int)
    if let existing = try store.existingThumbnail(etag: etag) {
      made = existing
    } else {
      do {
        let thumbnail = try await store.imaging.run { () throws(Vips.Failure) -> Vips.Thumbnail in
          try Vips.thumbnail(
            path: path,
            height: pictures.thumbnailHeight,
            quality: pictures.thumbnailQuality
          )
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
        store.logger.info("picture refused by libvips", metadata: ["reason": "\(error)"])
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
    // Held from before its file is in place until its row is committed, so no release or
    // sweep removes the file in between.
    store.pictureRegistry.hold(etag)
    let old: String?
    do {
      let descriptor = self.descriptor
      let size = self.size
      var inline: [UInt8]? = nil
      if size <= Int64(pictures.inlineMaximumBytes) {
        inline = try await store.io.run {
          [UInt8](try PictureFiles.read(descriptor: descriptor, offset: 0, count: Int(size)))
        }
      } else {
        let files = store.pictureFiles
        try await store.io.run {
          try files.install(temporary: path, descriptor: descriptor, etag: etag)
        }
      }
      old = try await store.commitPicture(
        guid: self.guid,
        info: info,
        inline: inline,
        thumbnail: made.0,
        context: context
      )
      store.pictureRegistry.unhold(etag)
    } catch {
      store.pictureRegistry.unhold(etag)
      await store.releasePictureFiles([etag])
      throw error
    }
    if let old, old != etag { await store.releasePictureFiles([old]) }
    return StoredPicture(info: info, thumbnail: made.0)
  }

  /// Stops the upload and removes its temporary file. Safe to call more than once.
  public func abandon() {
    guard self.descriptor >= 0 else { return }
    close(self.descriptor)
    self.descriptor = -1
    unlink(self.temporary)
    self.store.pictureRegistry.release(temporary: self.temporary)
    self.hasher = nil
  }

  /// The content type the first bytes announce: JPEG or PNG, or nil.
  static func sniff(_ head: [UInt8]) -> String? {
    if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
    if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
    return nil
  }
}
