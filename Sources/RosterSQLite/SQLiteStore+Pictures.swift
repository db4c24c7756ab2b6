public import RosterDomain
public import RosterStore
internal import Foundation
internal import GRDB
internal import Logging

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
    if !contentType.isEmpty && !PictureUpload.contentTypes.contains(contentType) {
      throw StoreError(
        .invalidArgument,
        "content_type '\(contentType)' is not supported; send image/jpeg or image/png"
      )
    }
    if totalSize < 0 {
      throw StoreError(.invalidArgument, "a picture's declared size must not be negative")
    }
    let limit = self.configuration.pictures.maximumBytes
    if totalSize > limit {
      throw StoreError(
        .resourceExhausted,
        "total_size \(totalSize) is over the \(limit)-byte picture limit"
      )
    }
    let exists = try self.readStatement { db in
      try Bool.fetchOne(
        db,
        sql: "SELECT EXISTS (SELECT 1 FROM employees WHERE guid = ?)",
        arguments: [guid]
      ) ?? false
    }
    guard exists else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    return try PictureUpload(
      store: self,
      guid: guid,
      contentType: contentType,
      totalSize: totalSize
    )
  }

  /// Stores the picture file at `path` as `guid`'s picture, through the same path as an
  /// upload: `roster import` and demo seeding.
  @discardableResult
  public func putPicture(
    guid: String,
    file path: String,
    context: WriteContext = WriteContext()
  ) async throws -> StoredPicture {
    let upload = try self.beginPictureUpload(guid: guid)
    guard let handle = FileHandle(forReadingAtPath: path) else {
      throw StoreError(.invalidArgument, "picture file '\(path)' cannot be read")
    }
    defer { try? handle.close() }
    while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
      try await upload.append(chunk)
    }
    return try await upload.finish(context: context)
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
      guard
        let row = try Row.fetchOne(
          db,
          sql: "SELECT id, picture_etag FROM employees WHERE guid = ?",
          arguments: [guid]
        )
      else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      let id: Int64 = row[0]
      let old: String? = row[1]
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
      let now = Self.nowMillis()
      try db.execute(
        sql: "UPDATE employees SET picture_etag = ?, update_time = ? WHERE id = ?",
        arguments: [info.etag, now, id]
      )
      try db.execute(
        sql: """
          INSERT INTO employee_thumbnails (employee_id, data, width, height)
          VALUES (?, ?, ?, ?)
          ON CONFLICT (employee_id) DO UPDATE
            SET data = excluded.data, width = excluded.width, height = excluded.height
          """,
        arguments: [id, Data(thumbnail.data), thumbnail.width, thumbnail.height]
      )
      try Self.record(
        db,
        entity: .picture,
        guid: guid,
        kind: old == nil ? .inserted : .updated,
        fields: ["picture"],
        context: context,
        timeMillis: now
      )
      return old
    }
  }

  /// A thumbnail already made from the same content, if any employee has one: identical
  /// bytes were decoded and checked when they were first stored.
  func existingThumbnail(etag: String) throws -> (StoredThumbnail, width: Int, height: Int)? {
    try self.readStatement { db in
      guard
        let row = try Row.fetchOne(
          db,
          sql: """
            SELECT t.data, t.width, t.height, p.width, p.height
            FROM pictures p
            JOIN employees e ON e.picture_etag = p.etag
            JOIN employee_thumbnails t ON t.employee_id = e.id
            WHERE p.etag = ? LIMIT 1
            """,
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
        db,
        sql: """
          SELECT p.etag, p.size, p.content_type, p.width, p.height, p.data IS NOT NULL,
                 e.id IS NOT NULL
          FROM (SELECT 1) LEFT JOIN employees e ON e.guid = ?
          LEFT JOIN pictures p ON p.etag = e.picture_etag
          """,
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

  /// Runs `body` with `guid`'s picture open for reading. Small and hot pictures come from
  /// the in-memory cache; large ones stream from their file, which stays readable until
  /// `body` returns even if the picture is replaced meanwhile.
  public func withPicture<T: Sendable>(
    guid: String,
    _ body: (PictureInfo, any PictureReading) async throws -> T
  ) async throws -> T {
    let guid = try EmployeeValidation.requireGUID(guid)
    for attempt in 0..<2 {
      let (info, inline) = try self.pictureRow(guid: guid)
      if let bytes = self.pictureCache.get(info.etag) {
        return try await body(info, PictureReader(source: .memory(bytes)))
      }
      if inline {
        let bytes = try self.readStatement { db in
          try Data.fetchOne(db, sql: "SELECT data FROM pictures WHERE etag = ?", arguments: [info.etag])
        }
        guard let bytes else { continue }  // replaced meanwhile: read the row again
        let array = [UInt8](bytes)
        self.pictureCache.put(info.etag, array)
        return try await body(info, PictureReader(source: .memory(array)))
      }
      let path = self.pictureFiles.path(etag: info.etag)
      let cacheable = info.size <= Int64(self.pictureCache.largestEntry)
      let descriptor = await self.io.run { open(path, O_RDONLY | O_CLOEXEC) }
      if descriptor < 0 {
        if attempt == 0 { continue }
        throw StoreError(.unavailable, "picture for '\(guid)' is being replaced; try again")
      }
      if cacheable {
        let bytes = try await self.io.run {
          defer { close(descriptor) }
          return [UInt8](
            try PictureFiles.read(descriptor: descriptor, offset: 0, count: Int(info.size))
          )
        }
        self.pictureCache.put(info.etag, bytes)
        return try await body(info, PictureReader(source: .memory(bytes)))
      }
      let reader = PictureReader(source: .file(descriptor: descriptor, pool: self.io))
      do {
        let result = try await body(info, reader)
        close(descriptor)
        return result
      } catch {
        close(descriptor)
        throw error
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
        db,
        sql: """
          SELECT e.picture_etag, t.data, t.width, t.height FROM employees e
          LEFT JOIN employee_thumbnails t ON t.employee_id = e.id WHERE e.guid = ?
          """,
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
      guard
        let row = try Row.fetchOne(
          db,
          sql: "SELECT id, picture_etag FROM employees WHERE guid = ?",
          arguments: [guid]
        )
      else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      guard let old = row[1] as String? else {
        throw StoreError(.notFound, "employee '\(guid)' has no picture")
      }
      let now = Self.nowMillis()
      let id: Int64 = row[0]
      try db.execute(
        sql: "UPDATE employees SET picture_etag = NULL, update_time = ? WHERE id = ?",
        arguments: [now, id]
      )
      try db.execute(sql: "DELETE FROM employee_thumbnails WHERE employee_id = ?", arguments: [id])
      try Self.record(
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
    let etags = etags.filter { PictureFiles.isEtag($0) }
    if etags.isEmpty { return }
    await self.io.run {
      self.pictureRegistry.withHeld { held, _ in
        for etag in etags where !held.contains(etag) {
          let referenced =
            (try? self.readStatement { db in
              try Bool.fetchOne(
                db,
                sql: "SELECT EXISTS (SELECT 1 FROM pictures WHERE etag = ?)",
                arguments: [etag]
              )
            }) ?? true
          if referenced == false { self.pictureFiles.remove(etag: etag) }
        }
      }
    }
  }

  /// Removes every picture file no row references, and every temporary file no upload owns
  /// (left by a crash). Runs at start and then periodically.
  ///
  /// - Returns: how many files it removed.
  @discardableResult
  public func sweepPictureFiles() async throws -> Int {
    try await self.io.run {
      try self.pictureRegistry.withHeld { held, owned in
        let (etags, temporaries) = self.pictureFiles.inventory()
        let referenced = Set(
          try self.readStatement { db in
            try String.fetchAll(db, sql: "SELECT etag FROM pictures WHERE data IS NULL")
          }
        )
        var removed = 0
        for etag in etags where !referenced.contains(etag) && !held.contains(etag) {
          self.pictureFiles.remove(etag: etag)
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
}
