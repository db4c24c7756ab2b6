public import Foundation
internal import NIOCore
internal import PostgresNIO
public import RosterDomain
public import RosterPictures
public import RosterStore

extension PostgresStore {
  // MARK: Upload

  /// Starts an upload of `guid`'s new picture: bytes go to a local temporary file as they
  /// arrive; `finish` stores them in the database in chunks.
  public func beginPictureUpload(
    guid: String,
    contentType: String,
    totalSize: Int64
  ) async throws -> any PictureUploading {
    let guid = try EmployeeValidation.requireGUID(guid)
    try self.pictures.checkDeclared(contentType: contentType, totalSize: totalSize)
    guard try await self.row("SELECT 1 FROM employees WHERE guid = \(guid)") != nil else {
      throw StoreError(.notFound, "no employee with guid '\(guid)'")
    }
    return try self.pictures.beginUpload(
      guid: guid,
      contentType: contentType,
      totalSize: totalSize,
      catalog: self
    )
  }

  /// Stores a finished upload: the picture once per content, in chunks read from the staged
  /// file one at a time (constant memory), then the employee's etag, thumbnail and change, in
  /// one transaction.
  public func storePicture(
    _ staged: StagedPicture,
    guid: String,
    info: PictureInfo,
    thumbnail: StoredThumbnail,
    context: WriteContext
  ) async throws {
    let chunkBytes = self.configuration.pictureChunkBytes
    try await self.transaction { transaction in
      guard
        let owner = try await transaction.row(
          "SELECT id, picture_etag FROM employees WHERE guid = \(guid) FOR UPDATE"
        )
      else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      let id = try owner[0].decode(Int64.self)
      let old = try owner[1].decode(String?.self)
      // DO UPDATE locks the picture row, so a concurrent release of the same content skips
      // it (see release_picture) until this transaction has pointed an employee at it.
      let inserted =
        try await transaction.row(
          """
          INSERT INTO pictures AS p (etag, size, content_type, width, height, chunk_bytes)
          VALUES (\(info.etag), \(info.size), \(info.contentType), \(Int32(info.width)), \(Int32(info.height)), \(Int32(chunkBytes)))
          ON CONFLICT (etag) DO UPDATE SET etag = p.etag
          RETURNING xmax = 0
          """
        )?[0].decode(Bool.self) ?? false
      if inserted {
        var offset: Int64 = 0
        var n: Int32 = 0
        while offset < info.size {
          let bytes = try await staged.read(offset: offset, count: chunkBytes)
          if bytes.isEmpty {
            throw StoreError(.unavailable, "the upload's file ended early; send the picture again")
          }
          try await transaction.execute(
            "INSERT INTO picture_chunks (etag, n, data) VALUES (\(info.etag), \(n), \(ByteBuffer(bytes: bytes)))"
          )
          offset += Int64(bytes.count)
          n += 1
        }
      }
      let now = Self.nowMillis()
      try await transaction.execute(
        "UPDATE employees SET picture_etag = \(info.etag), update_time = \(now) WHERE id = \(id)"
      )
      try await transaction.execute(
        """
        INSERT INTO employee_thumbnails (employee_id, data, width, height)
        VALUES (\(id), \(ByteBuffer(bytes: thumbnail.data)), \(Int32(thumbnail.width)), \(Int32(thumbnail.height)))
        ON CONFLICT (employee_id) DO UPDATE SET data = EXCLUDED.data, width = EXCLUDED.width, height = EXCLUDED.height
        """
      )
      transaction.record(
        .picture,
        guid: guid,
        kind: old == nil ? .inserted : .updated,
        fields: ["picture"],
        context: context,
        timeMillis: now
      )
    }
  }

  /// Points each employee at the content stored under its etag, with the thumbnail another
  /// employee already has of it, in one transaction of set-wise statements; those whose
  /// content no employee holds are left.
  public func attachPictures(
    _ pictures: [(guid: String, etag: String)],
    context: WriteContext
  ) async throws -> Set<String> {
    let pictures = try pictures.map {
      (guid: try EmployeeValidation.requireGUID($0.guid), etag: $0.etag)
    }
    let guids = pictures.map(\.guid)
    return try await self.transaction { transaction in
      var owners: [String: (id: Int64, old: String?)] = [:]
      for row in try await transaction.rows(
        "SELECT guid, id, picture_etag FROM employees WHERE guid = ANY(\(guids)) ORDER BY id FOR UPDATE"
      ) {
        owners[try row[0].decode(String.self)] = (
          try row[1].decode(Int64.self), try row[2].decode(String?.self)
        )
      }
      if let missing = guids.first(where: { owners[$0] == nil }) {
        throw StoreError(.notFound, "no employee with guid '\(missing)'")
      }
      // The content rows are locked as storePicture locks them, so a concurrent release of
      // the same content skips them; each one's thumbnail comes from an employee holding it.
      let etags = Array(Set(pictures.map(\.etag))).sorted()
      _ = try await transaction.rows(
        "SELECT etag FROM pictures WHERE etag = ANY(\(etags)) ORDER BY etag FOR UPDATE"
      )
      var holders: [String: Int64] = [:]
      for row in try await transaction.rows(
        // One holder per content, found through the index on picture_etag: never a scan of
        // every employee who holds it.
        """
        SELECT w.etag, h.id FROM unnest(\(etags)::text[]) AS w(etag)
        JOIN LATERAL (
          SELECT e.id FROM employees e JOIN employee_thumbnails t ON t.employee_id = e.id
          WHERE e.picture_etag = w.etag LIMIT 1
        ) h ON true
        """
      ) {
        holders[try row[0].decode(String.self)] = try row[1].decode(Int64.self)
      }
      var attached = Set<String>()
      var (ids, sources, newEtags): ([Int64], [Int64], [String]) = ([], [], [])
      let now = Self.nowMillis()
      for (guid, etag) in pictures {
        guard let owner = owners[guid] else { continue }
        if owner.old == etag {
          attached.insert(guid)
          continue
        }
        guard let holder = holders[etag] else { continue }
        ids.append(owner.id)
        sources.append(holder)
        newEtags.append(etag)
        attached.insert(guid)
        transaction.record(
          .picture,
          guid: guid,
          kind: owner.old == nil ? .inserted : .updated,
          fields: ["picture"],
          context: context,
          timeMillis: now
        )
      }
      if ids.isEmpty { return attached }
      try await transaction.execute(
        """
        UPDATE employees e SET picture_etag = w.etag, update_time = \(now)
        FROM unnest(\(ids)::int8[], \(newEtags)::text[]) AS w(id, etag) WHERE e.id = w.id
        """
      )
      try await transaction.execute(
        """
        INSERT INTO employee_thumbnails (employee_id, data, width, height)
        SELECT w.id, t.data, t.width, t.height
        FROM unnest(\(ids)::int8[], \(sources)::int8[]) AS w(id, source)
        JOIN employee_thumbnails t ON t.employee_id = w.source
        ON CONFLICT (employee_id) DO UPDATE SET data = EXCLUDED.data, width = EXCLUDED.width, height = EXCLUDED.height
        """
      )
      return attached
    }
  }

  /// A thumbnail already made from the same content, if any employee has one.
  public func existingThumbnail(
    etag: String
  ) async throws -> (StoredThumbnail, width: Int, height: Int)? {
    guard
      let row = try await self.row(
        """
        SELECT t.data, t.width, t.height, p.width, p.height FROM pictures p
        JOIN employees e ON e.picture_etag = p.etag
        JOIN employee_thumbnails t ON t.employee_id = e.id
        WHERE p.etag = \(etag) LIMIT 1
        """
      )
    else { return nil }
    let data = try row[0].decode(ByteBuffer.self)
    let thumbnail = StoredThumbnail(
      data: Array(data.readableBytesView),
      etag: etag,
      width: try row[1].decode(Int.self),
      height: try row[2].decode(Int.self)
    )
    return (thumbnail, try row[3].decode(Int.self), try row[4].decode(Int.self))
  }

  // MARK: Reads

  /// Runs `body` with `guid`'s picture and a reader of its chunks. A picture replaced while
  /// it is read ends the read with `unavailable` rather than with other bytes.
  public func withPicture<T: Sendable>(
    guid: String,
    _ body: (PictureInfo, any PictureReading) async throws -> T
  ) async throws -> T {
    let guid = try EmployeeValidation.requireGUID(guid)
    guard
      let row = try await self.row(
        """
        SELECT e.id, p.etag, p.size, p.content_type, p.width, p.height, p.chunk_bytes
        FROM employees e LEFT JOIN pictures p ON p.etag = e.picture_etag WHERE e.guid = \(guid)
        """
      )
    else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    guard let etag = try row[1].decode(String?.self) else {
      throw StoreError(.notFound, "employee '\(guid)' has no picture")
    }
    let info = PictureInfo(
      etag: etag,
      size: try row[2].decode(Int64.self),
      contentType: try row[3].decode(String.self),
      width: try row[4].decode(Int.self),
      height: try row[5].decode(Int.self)
    )
    let reader = ChunkReader(
      store: self,
      etag: etag,
      size: info.size,
      chunkBytes: try row[6].decode(Int.self)
    )
    return try await body(info, reader)
  }

  /// `guid`'s thumbnail.
  public func thumbnail(guid: String) async throws -> StoredThumbnail {
    let guid = try EmployeeValidation.requireGUID(guid)
    guard
      let row = try await self.row(
        """
        SELECT e.picture_etag, t.data, t.width, t.height FROM employees e
        LEFT JOIN employee_thumbnails t ON t.employee_id = e.id WHERE e.guid = \(guid)
        """
      )
    else { throw StoreError(.notFound, "no employee with guid '\(guid)'") }
    guard let etag = try row[0].decode(String?.self), let data = try row[1].decode(ByteBuffer?.self)
    else {
      throw StoreError(.notFound, "employee '\(guid)' has no picture")
    }
    return StoredThumbnail(
      data: Array(data.readableBytesView),
      etag: etag,
      width: try row[2].decode(Int.self),
      height: try row[3].decode(Int.self)
    )
  }

  // MARK: Removal

  /// Removes `guid`'s picture and thumbnail; the picture's rows go once nothing references
  /// them (`release_picture`).
  public func deletePicture(guid: String, context: WriteContext) async throws {
    let guid = try EmployeeValidation.requireGUID(guid)
    try await self.submit { transaction in
      guard
        let owner = try await transaction.row(
          "SELECT id, picture_etag FROM employees WHERE guid = \(guid) FOR UPDATE"
        )
      else {
        throw StoreError(.notFound, "no employee with guid '\(guid)'")
      }
      let id = try owner[0].decode(Int64.self)
      guard try owner[1].decode(String?.self) != nil else {
        throw StoreError(.notFound, "employee '\(guid)' has no picture")
      }
      let now = Self.nowMillis()
      try await transaction.execute(
        "UPDATE employees SET picture_etag = NULL, update_time = \(now) WHERE id = \(id)"
      )
      try await transaction.execute("DELETE FROM employee_thumbnails WHERE employee_id = \(id)")
      transaction.record(
        .picture,
        guid: guid,
        kind: .deleted,
        fields: ["picture"],
        context: context,
        timeMillis: now
      )
    }
  }

  /// Removes pictures no employee references that no transaction holds: those a release
  /// skipped because an upload of the same content held them, and whose upload then failed.
  func sweepPictures() async throws {
    try await self.transaction { transaction in
      try await transaction.execute(
        """
        DELETE FROM pictures p WHERE p.etag IN (
          SELECT etag FROM pictures q
          WHERE NOT EXISTS (SELECT 1 FROM employees e WHERE e.picture_etag = q.etag)
          LIMIT 1000 FOR UPDATE SKIP LOCKED)
        """
      )
    }
  }
}

/// Reads a stored picture's chunks: each `read` fetches only the chunks it covers.
struct ChunkReader: PictureReading {
  let store: PostgresStore
  let etag: String
  let size: Int64
  let chunkBytes: Int

  func read(offset: Int64, count: Int) async throws -> Data {
    let end = min(self.size, offset + Int64(count))
    guard offset < end else { return Data() }
    let first = Int32(offset / Int64(self.chunkBytes))
    let last = Int32((end - 1) / Int64(self.chunkBytes))
    let rows = try await self.store.rows(
      """
      SELECT n, data FROM picture_chunks
      WHERE etag = \(self.etag) AND n BETWEEN \(first) AND \(last) ORDER BY n
      """
    )
    guard rows.count == Int(last - first) + 1 else {
      throw StoreError(.unavailable, "the picture was replaced while it was read; read it again")
    }
    var data = Data(capacity: Int(end - offset))
    for row in rows {
      let n = Int64(try row[0].decode(Int32.self))
      let chunk = try row[1].decode(ByteBuffer.self)
      let start = n * Int64(self.chunkBytes)
      let from = Int(max(offset, start) - start)
      let to = Int(min(end, start + Int64(chunk.readableBytes)) - start)
      if from < to {
        data.append(
          contentsOf: chunk.readableBytesView[chunk.readerIndex + from ..< chunk.readerIndex + to]
        )
      }
    }
    return data
  }
}
