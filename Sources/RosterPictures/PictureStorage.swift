public import Foundation
public import Logging
public import RosterDomain
internal import RosterImaging
public import RosterStore

#if canImport(Glibc)
internal import Glibc
#endif

/// The metadata side of pictures, which a backend provides: where a finished upload is
/// recorded, and what it already knows about a content hash.
public protocol PictureCatalog: Sendable {
  /// A thumbnail already made from the same content, with the picture's dimensions, if any
  /// employee has one: identical bytes were decoded and checked when first stored.
  func existingThumbnail(etag: String) async throws -> (StoredThumbnail, width: Int, height: Int)?

  /// Stores a finished, checked upload as `guid`'s picture and commits its row, thumbnail
  /// and change. Throws `notFound` if the employee went away meanwhile.
  func storePicture(
    _ staged: StagedPicture,
    guid: String,
    info: PictureInfo,
    thumbnail: StoredThumbnail,
    context: WriteContext
  ) async throws
}

/// A finished upload's bytes, in its temporary file, for `PictureCatalog.storePicture`.
public struct StagedPicture: Sendable {
  let path: String
  let descriptor: Int32
  let io: BlockingPool
  /// The content hash, as hex.
  public let etag: String
  /// The picture's size in bytes.
  public let size: Int64

  /// All of its bytes, read off the request threads.
  public func bytes() async throws -> [UInt8] {
    let (descriptor, size) = (self.descriptor, self.size)
    return try await self.io.run {
      [UInt8](try PictureFiles.read(descriptor: descriptor, offset: 0, count: Int(size)))
    }
  }

  /// Up to `count` bytes from `offset` (fewer only at the end), read off the request
  /// threads: for a backend that stores a picture in chunks, in constant memory.
  public func read(offset: Int64, count: Int) async throws -> Data {
    let descriptor = self.descriptor
    let count = Int(max(0, min(Int64(count), self.size - offset)))
    return try await self.io.run {
      try PictureFiles.read(descriptor: descriptor, offset: offset, count: count)
    }
  }
}

/// Pictures apart from the database rows: the upload pipeline (a temporary file and a running
/// hash, the checks, libvips thumbnails on a bounded pool), content-addressed files for large
/// pictures, the in-memory cache of hot ones, and the sweep of files nothing references.
///
/// A backend holds one and supplies the metadata (`PictureCatalog`); the files are named by
/// the content hash the server computed, never by anything a client sent.
///
/// ```swift
/// let pictures = try PictureStorage(configuration: .init(), directory: "data/pictures", cacheBytes: 64 << 20)
/// let upload = try pictures.beginUpload(guid: guid, contentType: "", totalSize: 0, catalog: store)
/// ```
public struct PictureStorage: Sendable {
  /// Limits, thumbnail settings and sizes.
  public let configuration: PictureConfiguration
  let files: PictureFiles
  /// Where the picture files and uploads in progress are.
  public var directory: String { self.files.directory }
  let registry = PictureRegistry()
  /// Hot pictures in memory.
  public let cache: PictureCache
  /// Blocking file I/O, off the request threads.
  let io: BlockingPool
  /// libvips work, with bounded concurrency.
  let imaging: BlockingPool
  let logger: Logger

  /// Opens (creating if needed) `directory` for picture files and uploads in progress.
  public init(
    configuration: PictureConfiguration,
    directory: String,
    cacheBytes: Int,
    logger: Logger = Logger(label: "roster.pictures")
  ) throws {
    self.configuration = configuration
    self.logger = logger
    self.files = try PictureFiles(directory: directory)
    self.cache = PictureCache(budget: cacheBytes)
    self.io = BlockingPool(label: "roster.io", width: 4)
    self.imaging = BlockingPool(label: "roster.imaging", width: configuration.thumbnailConcurrency)
  }

  // MARK: Uploads

  /// Checks what a client declared before any byte arrives.
  ///
  /// - Throws: `invalidArgument` for an unsupported `contentType` or a negative size,
  ///   `resourceExhausted` when `totalSize` is over the limit.
  public func checkDeclared(contentType: String, totalSize: Int64) throws {
    if !contentType.isEmpty && !PictureFormat.contentTypes.contains(contentType) {
      throw StoreError(
        .invalidArgument,
        "content_type '\(contentType)' is not supported; send image/jpeg or image/png"
      )
    }
    if totalSize < 0 {
      throw StoreError(.invalidArgument, "a picture's declared size must not be negative")
    }
    let limit = self.configuration.maximumBytes
    if totalSize > limit {
      throw StoreError(
        .resourceExhausted,
        "total_size \(totalSize) is over the \(limit)-byte picture limit"
      )
    }
  }

  /// Starts an upload for `guid` whose finished picture goes to `catalog`. Call
  /// `checkDeclared` and check that the employee exists first.
  public func beginUpload(
    guid: String,
    contentType: String,
    totalSize: Int64,
    catalog: some PictureCatalog
  ) throws -> any PictureUploading {
    try PictureUpload(
      storage: self,
      catalog: catalog,
      guid: guid,
      contentType: contentType,
      totalSize: totalSize
    )
  }

  /// Makes a thumbnail of the picture at `path`, on the imaging pool.
  func thumbnail(path: String) async throws(Vips.Failure) -> Vips.Thumbnail {
    let (height, quality) = (
      self.configuration.thumbnailHeight, self.configuration.thumbnailQuality
    )
    return try await self.imaging.run { () throws(Vips.Failure) -> Vips.Thumbnail in
      try Vips.thumbnail(path: path, height: height, quality: quality)
    }
  }

  // MARK: Files

  /// Runs `body`, which places `etag`'s file and commits the row that references it, with
  /// the file protected from release and sweep throughout. If `body` fails, the file goes
  /// again unless `isReferenced` says a row still holds it.
  public func holding<T>(
    _ etag: String,
    isReferenced: @escaping @Sendable (String) throws -> Bool,
    _ body: () async throws -> T
  ) async throws -> T {
    self.registry.hold(etag)
    do {
      let result = try await body()
      self.registry.unhold(etag)
      return result
    } catch {
      self.registry.unhold(etag)
      await self.release([etag], isReferenced: isReferenced)
      throw error
    }
  }

  /// Makes a staged upload the file for its etag: fsync, rename, fsync the directory.
  public func install(_ staged: StagedPicture) async throws {
    let files = self.files
    try await StoreTracing.withSpan("picture.install") {
      try await self.io.run {
        try files.install(temporary: staged.path, descriptor: staged.descriptor, etag: staged.etag)
      }
    }
  }

  /// Removes the files of `etags` that no row references (`isReferenced`) and no upload
  /// holds. Called after commits that may have dropped the last reference.
  public func release(
    _ etags: [String],
    isReferenced: @escaping @Sendable (String) throws -> Bool
  ) async {
    let etags = etags.filter { PictureFiles.isEtag($0) }
    if etags.isEmpty { return }
    let (files, registry) = (self.files, self.registry)
    // On the I/O pool (point reads and unlinks block), under the registry's lock, so no
    // upload can hold an etag between the check and the removal.
    await self.io.run {
      registry.withHeld { held, _ in
        for etag in etags where !held.contains(etag) {
          if (try? isReferenced(etag)) == false { files.remove(etag: etag) }
        }
      }
    }
  }

  /// Removes every picture file whose etag is not in `referenced` and no upload holds, and
  /// every temporary file no upload owns (left by a crash).
  ///
  /// - Returns: how many files it removed.
  public func sweep(referenced: @escaping @Sendable () throws -> Set<String>) async throws -> Int {
    let (files, registry) = (self.files, self.registry)
    return try await self.io.run {
      try registry.withHeld { held, owned in
        let (etags, temporaries) = files.inventory()
        let referenced = try referenced()
        var removed = 0
        for etag in etags where !referenced.contains(etag) && !held.contains(etag) {
          files.remove(etag: etag)
          removed += 1
        }
        for temporary in temporaries where !owned.contains(temporary) {
          unlink(temporary)
          removed += 1
        }
        return removed
      }
    }
  }

  // MARK: Reads

  /// Runs `body` with `info`'s bytes open for reading: from the cache, from `inline` (the
  /// backend's copy of a small picture), or from its file, which stays readable until `body`
  /// returns even if the picture is replaced meanwhile. Pictures up to an eighth of the cache
  /// are cached. Returns nil when the picture went away meanwhile: read its row again.
  public func withReader<T: Sendable>(
    _ info: PictureInfo,
    inline: (() throws -> Data?)?,
    _ body: (PictureInfo, any PictureReading) async throws -> T
  ) async throws -> T? {
    if let bytes = self.cache.get(info.etag) {
      return try await body(info, PictureReader(source: .memory(bytes)))
    }
    if let inline {
      guard let bytes = try inline() else { return nil }
      let array = [UInt8](bytes)
      self.cache.put(info.etag, array)
      return try await body(info, PictureReader(source: .memory(array)))
    }
    let path = self.files.path(etag: info.etag)
    let descriptor = await self.io.run { open(path, O_RDONLY | O_CLOEXEC) }
    if descriptor < 0 { return nil }
    if info.size <= Int64(self.cache.largestEntry) {
      let bytes = try await StoreTracing.withSpan("picture.read") {
        try await self.io.run {
          defer { close(descriptor) }
          return [UInt8](
            try PictureFiles.read(descriptor: descriptor, offset: 0, count: Int(info.size))
          )
        }
      }
      self.cache.put(info.etag, bytes)
      return try await body(info, PictureReader(source: .memory(bytes)))
    }
    defer { close(descriptor) }
    return try await body(info, PictureReader(source: .file(descriptor: descriptor, pool: self.io)))
  }
}
