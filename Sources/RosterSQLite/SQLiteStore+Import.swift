internal import Foundation
internal import GRDB
public import RosterDomain

extension SQLiteStore {
  // MARK: Bulk upsert

  /// Merges rows by guid, as they arrive, in chunks of `writer.bulkChunkRows` rows.
  ///
  /// A new guid is inserted, and must carry name, department and start date. An existing guid
  /// gets the fields its row sets. Bad rows are reported with their index and skipped; they
  /// never stop the good ones. Each chunk is one bulk request to the writer, and while one
  /// chunk commits the next one fills (`ChunkedWrites`).
  ///
  /// The rows are read (for a gRPC stream: decoded) and checked on the store's bulk thread,
  /// below the usual priority (`BulkExecutor`).
  public func upsertEmployees<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext = WriteContext(),
    chunkRows: Int? = nil
  ) async throws -> ImportSummary where Rows.Element == [UpsertRow] {
    let chunkRows = chunkRows ?? self.configuration.writer.bulkChunkRows
    return try await self.bulk.run {
      try await ChunkedWrites.run(messages, chunkRows: chunkRows) { row, index in
        (index: index, row: try row.checked())
      } write: { chunk in
        try await self.upsertChunk(chunk, context: context)
      }
    }
  }

  /// Writes one chunk of validated rows in one bulk request to the writer.
  private func upsertChunk(
    _ rows: [(index: Int, row: UpsertRow)],
    context: WriteContext
  ) async throws -> ImportSummary {
    try await self.submit(bulk: true) { db in
      var summary = ImportSummary()
      let now = Self.nowMillis()
      for (index, row) in rows {
        if let old = try Self.fetchEmployee(db, guid: row.guid, fields: .editable) {
          summary.updated += 1
          let new = row.changes.applied(to: old)
          let paths = EmployeeChanges.differences(old, new)
          if paths.isEmpty { continue }
          try Self.update(db, id: old.id, to: new, paths: paths, now: now)
          try self.record(
            db,
            entity: .employee,
            guid: row.guid,
            kind: .updated,
            fields: paths.map(\.rawValue),
            context: context,
            timeMillis: now
          )
        } else {
          let employee: Employee
          do {
            employee = try row.newEmployee()
          } catch let error as StoreError {
            summary.reject(index: index, reason: error.message)
            continue
          }
          try Self.insert(db, employee, now: now)
          try self.record(
            db,
            entity: .employee,
            guid: row.guid,
            kind: .inserted,
            context: context,
            timeMillis: now
          )
          summary.inserted += 1
        }
      }
      return summary
    }
  }
}
