internal import Foundation
internal import GRDB
public import RosterDomain
internal import RosterPictures

/// Backups, restores and checks of a SQLite deployment: the database file and its picture
/// files. `roster backup` and `roster check` run in a process of their own beside a running
/// server (WAL lets a reader hold a snapshot while the server goes on writing); `roster
/// restore` replaces a stopped server's files.
///
/// A backup directory holds `roster.sqlite`, a consistent snapshot made with SQLite's online
/// backup API in one step (one read transaction), and `pictures/`, the files of the large
/// pictures that snapshot references, laid out as the server lays them out. Picture files are
/// content-addressed and never change, so they are hard-linked where the filesystem allows
/// (copied elsewhere): first every file present before the snapshot, then the few the snapshot
/// references that arrived meanwhile; a file removed before it could be taken (replaced and
/// released within that moment) makes the backup start again, at most three times.
///
/// ```swift
/// let report = try SQLiteMaintenance.backup(database: "data/roster.sqlite", into: "/backups/monday")
/// let check = try SQLiteMaintenance.check(database: "/backups/monday/roster.sqlite",
///                                         picturesDirectory: "/backups/monday/pictures")
/// ```
public enum SQLiteMaintenance {
  /// A backup's database file, in its directory.
  public static let databaseName = "roster.sqlite"
  /// A backup's picture directory, in its directory.
  public static let picturesName = "pictures"

  /// What a backup copied.
  public struct BackupReport: Sendable {
    /// The size of the database copy.
    public var databaseBytes: Int64
    /// The picture files the copy references.
    public var pictureFiles: Int
    /// How many of them are hard links to the server's files (the rest are copies).
    public var linkedPictureFiles: Int
    /// Snapshots taken: 1 unless a referenced picture went away before it could be taken.
    public var attempts: Int
  }

  /// A maintenance command's failure, said for the operator.
  public struct Failure: Error, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
      self.description = description
    }
  }

  /// Copies the database at `database` and the picture files it references into `directory`,
  /// which must not exist or be empty.
  public static func backup(
    database: String,
    picturesDirectory: String? = nil,
    into directory: String,
    progress: ProgressMeter.Output = .silent
  ) throws -> BackupReport {
    let manager = FileManager.default
    guard manager.fileExists(atPath: database) else { throw Failure("no database at \(database)") }
    if let existing = try? manager.contentsOfDirectory(atPath: directory), !existing.isEmpty {
      throw Failure("\(directory) is not empty: a backup goes into a new directory")
    }
    try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let sourcePictures = picturesDirectory ?? StoreConfiguration(path: database).picturesDirectory
    let source =
      manager.fileExists(atPath: sourcePictures) ? try PictureFiles(directory: sourcePictures) : nil
    let target = try PictureFiles(directory: "\(directory)/\(Self.picturesName)")
    let copy = "\(directory)/\(Self.databaseName)"
    for attempt in 1 ... 3 {
      for suffix in ["", "-wal", "-shm"] { unlink(copy + suffix) }
      // Every file there now, before the snapshot: whatever the snapshot references that is
      // older than it is among them.
      let files = source?.inventory().etags ?? []
      let taken = ProgressMeter("pictures linked", total: Int64(files.count), output: progress)
      for etag in files where access(target.path(etag: etag), F_OK) != 0 {
        try Self.take(etag, from: source!, into: target)
        taken.advance(by: 1)
      }
      taken.finish()
      try Self.snapshot(database, into: copy)
      let referenced = try Self.fileEtags(copy)
      let missing = try referenced.contains { etag in
        guard access(target.path(etag: etag), F_OK) != 0 else { return false }
        guard let source else { return true }
        try Self.take(etag, from: source, into: target)
        return access(target.path(etag: etag), F_OK) != 0
      }
      if missing { continue }
      // Files the snapshot does not reference (taken before it, released since) go.
      for etag in Set(target.inventory().etags).subtracting(referenced) {
        target.remove(etag: etag)
      }
      try? manager.removeItem(atPath: "\(target.directory)/tmp")
      let attributes = try? manager.attributesOfItem(atPath: copy)
      return BackupReport(
        databaseBytes: (attributes?[.size] as? NSNumber)?.int64Value ?? 0,
        pictureFiles: referenced.count,
        linkedPictureFiles: referenced.filter { Self.isLink(target.path(etag: $0)) }.count,
        attempts: attempt
      )
    }
    throw Failure("pictures kept changing under three snapshots in a row; try again")
  }

  /// Puts `etag`'s file into `target`: a hard link, or a copy across filesystems. A file that
  /// went meanwhile is left out; the caller looks again.
  private static func take(
    _ etag: String,
    from source: PictureFiles,
    into target: PictureFiles
  ) throws {
    let from = source.path(etag: etag)
    let to = target.path(etag: etag)
    try FileManager.default.createDirectory(
      atPath: (to as NSString).deletingLastPathComponent,
      withIntermediateDirectories: true
    )
    if link(from, to) == 0 { return }
    let error = errno
    switch error {
    case ENOENT:
      return
    case EXDEV, EPERM, EMLINK:
      do {
        try FileManager.default.copyItem(atPath: from, toPath: to)
      } catch CocoaError.fileReadNoSuchFile {
        return
      }
    default:
      throw Failure("cannot link \(from) to \(to): \(String(cString: strerror(error)))")
    }
  }

  private static func isLink(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && info.st_nlink > 1
  }

  /// A consistent copy of `database` at `copy`: SQLite's backup API in one step, inside one
  /// read transaction of the source, so the server's writes go on meanwhile.
  private static func snapshot(_ database: String, into copy: String) throws {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    let source = try DatabaseQueue(path: database, configuration: configuration)
    let destination = try DatabaseQueue(path: copy)
    try source.backup(to: destination)
    // The copy on its own: no WAL beside it.
    try destination.writeWithoutTransaction { db in
      try db.execute(sql: "PRAGMA journal_mode = DELETE")
    }
    try destination.close()
    try source.close()
  }

  /// The etags of the pictures a database keeps in files (larger ones; small ones are rows).
  private static func fileEtags(_ database: String) throws -> Set<String> {
    var configuration = Configuration()
    configuration.readonly = true
    let queue = try DatabaseQueue(path: database, configuration: configuration)
    defer { try? queue.close() }
    return try queue.read { db in
      Set(try String.fetchAll(db, sql: "SELECT etag FROM pictures WHERE data IS NULL"))
    }
  }
}
