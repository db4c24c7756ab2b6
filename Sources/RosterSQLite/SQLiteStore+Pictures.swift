internal import Foundation
internal import GRDB
public import RosterDomain
public import RosterPictures
public import RosterStore

#if canImport(Glibc)
internal import Glibc
#endif

extension SQLiteStore {
  // MARK: Upload

  /// Starts an upload of `guid`'s new picture. Bytes go to a temporary file as they arrive,
  /// so memory stays flat whatever the size.
  ///
  /// - Throws: `invalidArgument` for a malformed guid or an unsupported `contentType`,
  ///   `notFound` for an unknown employee, `resourceExhausted` when `totalSize` is over the
  ///   limit.
  public func beginPictureUpload(
    guid: String,
    contentType: String = "",
    totalSize: Int64 = 0
  ) throws -> any PictureUploading {
    let guid = try EmployeeValidation.requireGUID(guid)
    try self.pictures.checkDeclared(contentType: contentType, totalSize: totalSize)
    let exists = try self.readStatement { db in
      try Bool.fetchOne(
        db.cachedStatement(
          sql: "SELECT EXISTS (SELECT 1 FROM employees WHERE guid = ?)"
        ),
        arguments: [guid]
      ) ?? false
    }
    guard exists else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    return try self.pictures.beginUpload(
      guid: guid,
      contentType: contentType,
      totalSize: totalSize,
      catalog: self
    )
  }

  /// Stores a finished upload: small pictures inline in their row, larger ones as files
  /// (placed before the row that references them commits, and protected from the sweep
  /// until it has). The file a replaced picture leaves goes once nothing references it.
  public func storePicture(
    _ staged: StagedPicture,
    guid: String,
    info: PictureInfo,
    thumbnail: StoredThumbnail,
    context: WriteContext
  ) async throws {
    let old = try await self.pictures.holding(info.etag, isReferenced: self.isPictureReferenced) {
      var inline: [UInt8]? = nil
      if staged.size <= Int64(self.pictures.configuration.inlineMaximumBytes) {
        inline = try await staged.bytes()
      } else {
        try await self.pictures.install(staged)
      }
      return try await self.commitPicture(
        guid: guid,
        info: info,
        inline: inline,
        thumbnail: thumbnail,
        context: context
      )
    }
    if let old, old != info.etag { await self.releasePictureFiles([old]) }
  }

  /// Commits an upload's row: the picture (once per content), the employee's etag and
  /// thumbnail, and the change. Returns the etag it replaced.
  func commitPicture(
    guid: String,
    info: PictureInfo,
    inline: [UInt8]?,
    thumbnail: StoredThumbnail,
    context: WriteContext
  ) async throws -> String? {
    try await self.submit { db in
      let (id, old) = try Self.pictureOwner(db, guid: guid)
      try db.execute(
        sql: """
          INSERT INTO pictures (etag, size, content_type, width, height, data)
          VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (etag) DO NOTHING
          """,
        arguments: [
          info.etag, info.size, info.contentType, info.width, info.height,
          inline.map { Data($0) },
        ]
      )
      try self.pointEmployee(
        db,
        (id, guid, old),
        at: info.etag,
        thumbnail: (Data(thumbnail.data), thumbnail.width, thumbnail.height),
        context: context,
        timeMillis: Self.nowMillis()
      )
      return old
    }
  }

  /// Points employee `owner` at the picture `etag` with its thumbnail, and records the change.
  private func pointEmployee(
    _ db: Database,
    _ owner: (id: Int64, guid: String, old: String?),
    at etag: String,
    thumbnail: (data: Data, width: Int, height: Int),
    context: WriteContext,
    timeMillis now: Int64
  ) throws {
    try db.execute(
      sql: "UPDATE employees SET picture_etag = ?, update_time = ? WHERE id = ?",
      arguments: [etag, now, owner.id]
    )
    try db.execute(
      sql: """
        INSERT INTO employee_thumbnails (employee_id, data, width, height)
        VALUES (?, ?, ?, ?)
        ON CONFLICT (employee_id) DO UPDATE
          SET data = excluded.data, width = excluded.width, height = excluded.height
        """,
      arguments: [owner.id, thumbnail.data, thumbnail.width, thumbnail.height]
    )
    try self.record(
      db,
      entity: .picture,
      guid: owner.guid,
      kind: owner.old == nil ? .inserted : .updated,
      fields: ["picture"],
      context: context,
      timeMillis: now
    )
  }

  /// Points each employee at the content stored under its etag, with the thumbnail another
  /// employee already has of it, in one write; those whose content no employee holds are left.
  public func attachPictures(
    _ pictures: [(guid: String, etag: String)],
    context: WriteContext
  ) async throws -> Set<String> {
    let pictures = try pictures.map {
      (guid: try EmployeeValidation.requireGUID($0.guid), etag: $0.etag)
    }
    // No hold on the content is needed: it is attached only within the write that finds
    // another employee referencing it, and files are removed only when nothing does.
    let (attached, replaced) = try await self.submit { db -> (Set<String>, [String]) in
      var attached = Set<String>()
      var replaced: [String] = []
      var thumbnails: [String: Row?] = [:]
      let now = Self.nowMillis()
      for (guid, etag) in pictures {
        let (id, old) = try Self.pictureOwner(db, guid: guid)
        if old == etag {
          attached.insert(guid)
          continue
        }
        if thumbnails[etag] == nil {
          thumbnails[etag] = try Row.fetchOne(
            db.cachedStatement(
              sql: """
                SELECT t.data, t.width, t.height FROM employees e
                JOIN employee_thumbnails t ON t.employee_id = e.id
                WHERE e.picture_etag = ? LIMIT 1
                """
            ),
            arguments: [etag]
          )
        }
        guard let thumbnail = thumbnails[etag] ?? nil else { continue }
        try self.pointEmployee(
          db,
          (id, guid, old),
          at: etag,
          thumbnail: (thumbnail[0], thumbnail[1], thumbnail[2]),
          context: context,
          timeMillis: now
        )
        attached.insert(guid)
        if let old { replaced.append(old) }
      }
      return (attached, replaced)
    }
    if !replaced.isEmpty { await self.releasePictureFiles(replaced) }
    return attached
  }

  /// The row id and picture etag of employee `guid`. Throws `notFound` for an unknown guid.
  private static func pictureOwner(
    _ db: Database,
    guid: String
  ) throws -> (id: Int64, etag: String?) {
    guard
      let row = try Row.fetchOne(
        db.cachedStatement(
          sql: "SELECT id, picture_etag FROM employees WHERE guid = ?"
        ),
        arguments: [guid]
      )
    else {
      throw StoreError(.notFound, "no employee with guid '\(guid)'")
    }
    return (row[0], row[1])
  }

  /// A thumbnail already made from the same content, if any employee has one: identical
  /// bytes were decoded and checked when they were first stored.
  public func existingThumbnail(
    etag: String
  ) async throws -> (StoredThumbnail, width: Int, height: Int)? {
    try self.readStatement { db in
      guard
        let row = try Row.fetchOne(
          db.cachedStatement(
            sql: """
              SELECT t.data, t.width, t.height, p.width, p.height
              FROM pictures p
              JOIN employees e ON e.picture_etag = p.etag
              JOIN employee_thumbnails t ON t.employee_id = e.id
              WHERE p.etag = ? LIMIT 1
              """
          ),
          arguments: [etag]
        )
      else { return nil }
      let data: Data = row[0]
      let thumbnail = StoredThumbnail(
        data: [UInt8](data),
        etag: etag,
        width: row[1],
        height: row[2]
      )
      return (thumbnail, row[3], row[4])
    }
  }

  // MARK: Reads

  private func pictureRow(guid: String) throws -> (info: PictureInfo, inline: Bool) {
    let row = try self.readStatement { db in
      try Row.fetchOne(
        db.cachedStatement(
          sql: """
            SELECT p.etag, p.size, p.content_type, p.width, p.height, p.data IS NOT NULL,
                   e.id IS NOT NULL
            FROM (SELECT 1) LEFT JOIN employees e ON e.guid = ?
            LEFT JOIN pictures p ON p.etag = e.picture_etag
            """
        ),
        arguments: [guid]
      )
    }
    guard let row, row[6] as Bool else {
      throw StoreError(.notFound, "no employee with guid '\(guid)'")
    }
    guard let etag = row[0] as String? else {
      throw StoreError(.notFound, "employee '\(guid)' has no picture")
    }
    let info = PictureInfo(
      etag: etag,
      size: row[1],
      contentType: row[2],
      width: row[3],
      height: row[4]
    )
    return (info, row[5])
  }

  /// Runs `body` with `guid`'s picture open for reading (`PictureStorage.withReader`): from
  /// the cache, its row, or its file.
  public func withPicture<T: Sendable>(
    guid: String,
    _ body: (PictureInfo, any PictureReading) async throws -> T
  ) async throws -> T {
    let guid = try EmployeeValidation.requireGUID(guid)
    for _ in 0 ..< 2 {
      let (info, inline) = try self.pictureRow(guid: guid)
      let loadInline: (() throws -> Data?)? =
        inline
        ? {
          try self.readStatement { db in
            try Data.fetchOne(
              db.cachedStatement(
                sql: "SELECT data FROM pictures WHERE etag = ?"
              ),
              arguments: [info.etag]
            )
          }
        } : nil
      // nil: replaced meanwhile; read the row again.
      if let result = try await self.pictures.withReader(info, inline: loadInline, body) {
        return result
      }
    }
    throw StoreError(.unavailable, "picture for '\(guid)' is being replaced; try again")
  }

  /// `guid`'s thumbnail.
  ///
  /// - Throws: `invalidArgument` for a malformed guid, `notFound` for an unknown employee or
  ///   one with no picture.
  public func thumbnail(guid: String) throws -> StoredThumbnail {
    let guid = try EmployeeValidation.requireGUID(guid)
    let row = try self.readStatement { db in
      try Row.fetchOne(
        db.cachedStatement(
          sql: """
            SELECT e.picture_etag, t.data, t.width, t.height FROM employees e
            LEFT JOIN employee_thumbnails t ON t.employee_id = e.id WHERE e.guid = ?
            """
        ),
        arguments: [guid]
      )
    }
    guard let row else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    guard let etag = row[0] as String?, let data = row[1] as Data? else {
      throw StoreError(.notFound, "employee '\(guid)' has no picture")
    }
    return StoredThumbnail(
      data: [UInt8](data),
      etag: etag,
      width: row[2],
      height: row[3]
    )
  }

  // MARK: Removal

  /// Removes `guid`'s picture and thumbnail. The file goes once no employee references it.
  ///
  /// - Throws: `invalidArgument` for a malformed guid, `notFound` for an unknown employee or
  ///   one with no picture.
  public func deletePicture(guid: String, context: WriteContext = WriteContext()) async throws {
    let guid = try EmployeeValidation.requireGUID(guid)
    let old = try await self.submit { db -> String in
      let (id, current) = try Self.pictureOwner(db, guid: guid)
      guard let old = current else {
        throw StoreError(.notFound, "employee '\(guid)' has no picture")
      }
      let now = Self.nowMillis()
      try db.execute(
        sql: "UPDATE employees SET picture_etag = NULL, update_time = ? WHERE id = ?",
        arguments: [now, id]
      )
      try db.execute(sql: "DELETE FROM employee_thumbnails WHERE employee_id = ?", arguments: [id])
      try self.record(
        db,
        entity: .picture,
        guid: guid,
        kind: .deleted,
        fields: ["picture"],
        context: context,
        timeMillis: now
      )
      return old
    }
    await self.releasePictureFiles([old])
  }

  /// Removes the files of `etags` that no picture row references any more and no upload
  /// holds. Called after commits that may have dropped the last reference.
  func releasePictureFiles(_ etags: [String]) async {
    await self.pictures.release(etags, isReferenced: self.isPictureReferenced)
  }

  /// True when a picture row holds `etag`.
  func isPictureReferenced(_ etag: String) throws -> Bool {
    try self.readStatement { db in
      try Bool.fetchOne(
        db.cachedStatement(
          sql: "SELECT EXISTS (SELECT 1 FROM pictures WHERE etag = ?)"
        ),
        arguments: [etag]
      )
    } ?? true
  }

  /// Removes every picture file no row references, and every temporary file no upload owns
  /// (left by a crash). Runs at start and then periodically.
  ///
  /// - Returns: how many files it removed.
  @discardableResult
  public func sweepPictureFiles() async throws -> Int {
    try await self.pictures.sweep {
      Set(
        try self.readStatement { db in
          try String.fetchAll(db, sql: "SELECT etag FROM pictures WHERE data IS NULL")
        }
      )
    }
  }
}
