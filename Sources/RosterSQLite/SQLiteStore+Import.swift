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
  /// chunk commits the next one fills, so memory holds at most two chunks however long the
  /// input is.
  ///
  /// The rows are read (for a gRPC stream: decoded) and checked on the store's bulk thread,
  /// below the usual priority (`BulkExecutor`).
  public func upsertEmployees<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext = WriteContext(),
    chunkRows: Int? = nil
  ) async throws -> ImportSummary where Rows.Element == [UpsertRow] {
    let chunkRows = max(1, chunkRows ?? self.configuration.writer.bulkChunkRows)
    return try await self.bulk.run {
      try await self.mergeRows(messages, context: context, chunkRows: chunkRows)
    }
  }

  private func mergeRows<Rows: AsyncSequence>(
    _ messages: Rows,
    context: WriteContext,
    chunkRows: Int
  ) async throws -> ImportSummary where Rows.Element == [UpsertRow] {
    try await withThrowingTaskGroup(of: ImportSummary.self) { group in
      var summary = ImportSummary()
      var chunk: [(index: Int, row: UpsertRow)] = []
      chunk.reserveCapacity(chunkRows)
      var index = 0
      var inFlight = 0
      func send() async throws {
        if inFlight > 0, let done = try await group.next() {
          summary.merge(done)
          inFlight -= 1
        }
        let rows = chunk
        chunk.removeAll(keepingCapacity: true)
        group.addTask { try await self.upsertChunk(rows, context: context) }
        inFlight += 1
      }
      for try await message in messages {
        for row in message {
          defer { index += 1 }
          do {
            chunk.append((index, try row.checked()))
          } catch let error as StoreError {
            summary.reject(index: index, reason: error.message)
          }
          if chunk.count == chunkRows { try await send() }
        }
      }
      if !chunk.isEmpty { try await send() }
      for try await done in group { summary.merge(done) }
      summary.rejected.sort { $0.index < $1.index }
      return summary
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
          try Self.record(
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
          try Self.record(
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
