public import Foundation
public import RosterDomain
internal import RosterImaging

#if canImport(Glibc)
internal import Glibc
#endif

/// Large pictures as content-addressed files in a directory beside the database:
/// `<directory>/<first two hex digits>/<etag>`, and uploads in progress under `tmp/`.
///
/// A name is always an etag the server computed, never anything a client sent. A file is
/// written to a temporary name, fsynced, renamed into place, and then its directory is
/// fsynced, so after a crash a name holds either the whole content or nothing.
public struct PictureFiles: Sendable {
  /// The directory the files live in.
  public let directory: String

  /// Opens (creating if needed) the directory and its `tmp/`.
  public init(directory: String) throws {
    self.directory = directory
    try FileManager.default.createDirectory(
      atPath: "\(directory)/tmp",
      withIntermediateDirectories: true
    )
  }

  /// Where the file for `etag` lives.
  public func path(etag: String) -> String {
    precondition(Self.isEtag(etag), "picture file names are server-made etags")
    return "\(self.directory)/\(etag.prefix(2))/\(etag)"
  }

  /// True for a lowercase 64-digit hex string: the only names this store writes.
  public static func isEtag(_ name: some StringProtocol) -> Bool {
    name.utf8.count == 64
      && name.utf8.allSatisfy { (48 ... 57).contains($0) || (97 ... 102).contains($0) }
  }

  /// Creates a new, empty temporary file for an upload.
  public func createTemporary() throws -> (path: String, descriptor: Int32) {
    let path = "\(self.directory)/tmp/upload-\(UUID().uuidString.lowercased())"
    let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { throw Self.failure("create", path) }
    return (path, descriptor)
  }

  /// Makes the finished temporary file at `temporary` the file for `etag`: fsync, rename,
  /// fsync the directory. If identical content is already there, the temporary goes instead.
  public func install(temporary: String, descriptor: Int32, etag: String) throws {
    let target = self.path(etag: etag)
    let shard = "\(self.directory)/\(etag.prefix(2))"
    if access(target, F_OK) == 0 {
      unlink(temporary)
      return
    }
    guard fsync(descriptor) == 0 else { throw Self.failure("fsync", temporary) }
    try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
    guard rename(temporary, target) == 0 else { throw Self.failure("rename", temporary) }
    try Self.syncDirectory(shard)
  }

  /// Removes the file for `etag`, if there is one.
  public func remove(etag: String) {
    unlink(self.path(etag: etag))
  }

  /// What is wrong with `etag`'s file, if anything: it is missing, its size is not `size`, or
  /// its bytes' SHA-256 is not its name. Read in 1 MiB pieces, so a large file costs little
  /// memory.
  public func problem(etag: String, size: Int64) -> String? {
    let path = self.path(etag: etag)
    guard let file = FileHandle(forReadingAtPath: path) else {
      return "\(etag) has no file at \(path)"
    }
    defer { try? file.close() }
    var hasher = SHA256Hasher()
    var read: Int64 = 0
    while let piece = try? file.read(upToCount: 1 << 20), !piece.isEmpty {
      read += Int64(piece.count)
      piece.withUnsafeBytes { hasher.update($0) }
    }
    if read != size { return "\(etag) is \(read) bytes; its row says \(size)" }
    if hasher.finish() != etag {
      return "\(etag)'s bytes hash to something else: the file is damaged"
    }
    return nil
  }

  /// Every etag with a file, and every temporary file, as paths.
  public func inventory() -> (etags: [String], temporaries: [String]) {
    let manager = FileManager.default
    var etags: [String] = []
    for shard in (try? manager.contentsOfDirectory(atPath: self.directory)) ?? []
    where shard.utf8.count == 2 {
      let names = (try? manager.contentsOfDirectory(atPath: "\(self.directory)/\(shard)")) ?? []
      etags += names.filter { Self.isEtag($0) && $0.hasPrefix(shard) }
    }
    let temporaries = ((try? manager.contentsOfDirectory(atPath: "\(self.directory)/tmp")) ?? [])
      .map { "\(self.directory)/tmp/\($0)" }
    return (etags, temporaries)
  }

  /// Reads up to `count` bytes at `offset` from an open file, into one buffer that can go
  /// out as a message without another copy.
  public static func read(descriptor: Int32, offset: Int64, count: Int) throws -> Data {
    guard count > 0 else { return Data() }
    // Not `Data(count:)`, which zeroes every byte the read is about to overwrite.
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 16)
    var filled = 0
    while filled < count {
      let n = pread(descriptor, buffer + filled, count - filled, off_t(offset) + off_t(filled))
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else {
        buffer.deallocate()
        throw StoreError(.unavailable, "picture file could not be read")
      }
      if n == 0 { break }
      filled += n
    }
    return Data(
      bytesNoCopy: buffer,
      count: filled,
      deallocator: .custom { pointer, _ in pointer.deallocate() }
    )
  }

  /// Writes all of `bytes` to an open file.
  public static func write(descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws {
    var written = 0
    while written < bytes.count {
      let n = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { throw Self.failure("write", errno: n < 0 ? errno : ENOSPC) }
      written += n
    }
  }

  private static func syncDirectory(_ path: String) throws {
    let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard descriptor >= 0 else { throw Self.failure("open", path) }
    defer { close(descriptor) }
    guard fsync(descriptor) == 0 else { throw Self.failure("fsync", path) }
  }

  /// A failure for the server's log and the client: the client sees what went wrong (a full
  /// disk is `resourceExhausted`, anything else `unavailable`), never the path.
  private static func failure(_ operation: String, _ path: String) -> StoreError {
    Self.failure(operation, errno: errno)
  }

  private static func failure(_ operation: String, errno code: Int32) -> StoreError {
    let error = DiskFault(operation: "picture \(operation)", errno: code)
    error.record()
    return error.storeError
  }
}
