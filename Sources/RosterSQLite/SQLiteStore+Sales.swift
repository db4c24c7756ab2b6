internal import Foundation
internal import GRDB
public import RosterDomain

extension SQLiteStore {

  // MARK: Sales writes

  /// Imports sales as they stream in, in chunks through the writer. Bad rows (an unknown
  /// employee, a negative amount or one over `largestSaleCents`, a date before 1900 or more than a year ahead) are reported
  /// with their index and reason; the good rows land.
  ///
  /// The rows are read (for a gRPC stream: decoded) and checked on the store's bulk thread,
  /// below the usual priority (`BulkExecutor`).
  ///
  /// - Returns: how many were inserted, and the rejections (the first thousand listed, in
  ///   input order).
  public func importSales<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext = WriteContext(),
    chunkRows: Int? = nil
  ) async throws -> ImportSummary where Rows.Element == [SaleRow] {
    let latest = SaleChecks.latestSaleDate()
    return try await self.bulk.run {
      try await ChunkedWrites.run(messages, chunkRows: chunkRows ?? 5_000) { sale, index in
        (
          index: index, guid: try SaleChecks.check(sale, latest: latest).get(),
          cents: sale.amountCents, date: sale.date
        )
      } write: { chunk in
        try await self.submit(bulk: true) { db in
          try self.insertSales(db, chunk, context: context)
        }
      }
    }
  }

  /// Inserts a chunk of checked sales with three set-based statements over one JSON array,
  /// instead of three statements per row: each statement inside the writer's savepoint
  /// copies every page it first touches to the statement journal, so per-row statements
  /// wrote each hot page (rollups, indexes, the change log) once per row.
  private func insertSales(
    _ db: Database,
    _ rows: [(index: Int, guid: String, cents: Int64, date: String)],
    context: WriteContext
  ) throws -> ImportSummary {
    // Guids are canonical and dates checked digits, so nothing here needs escaping.
    var json = "["
    json.reserveCapacity(rows.count * 64)
    for (position, row) in rows.enumerated() {
      if position > 0 { json += "," }
      json += "[\"" + row.guid + "\"," + String(row.cents) + ",\"" + row.date + "\"]"
    }
    json += "]"
    let unknown = try Int.fetchAll(db, sql: AnalyticsSQL.unknownSaleEmployees, arguments: [json])
    try db.execute(sql: AnalyticsSQL.insertSales, arguments: [json])
    if self.feed.logsEachWrite {
      try db.execute(
        sql: AnalyticsSQL.logSales,
        arguments: [
          Change.Entity.sale.rawValue, Change.Kind.inserted.rawValue, "amount,date", context.author,
          Self.nowMillis(), json, context.onBehalfOf,
        ]
      )
    }
    var summary = ImportSummary()
    summary.inserted = rows.count - unknown.count
    for position in unknown {
      summary.reject(
        index: rows[position].index,
        reason: "no employee with guid '\(rows[position].guid)'"
      )
    }
    return summary
  }

  /// Deletes up to `limit` sales dated before `date`, 5,000 per transaction.
  ///
  /// - Returns: how many went, and whether more remain.
  public func deleteSales(
    before date: String,
    limit: Int,
    context: WriteContext = WriteContext()
  ) async throws -> (deleted: Int, more: Bool) {
    var deleted = 0
    while deleted < limit {
      let chunk = min(5_000, limit - deleted)
      let count = try await self.submit(bulk: true) { db in
        let rows = try Row.fetchAll(
          db,
          sql: """
            SELECT s.id, e.guid FROM sales s JOIN employees e ON e.id = s.employee_id
            WHERE s.date < ? LIMIT ?
            """,
          arguments: [date, chunk]
        )
        let delete = try db.cachedStatement(sql: "DELETE FROM sales WHERE id = ?")
        let now = Self.nowMillis()
        for row in rows {
          try delete.execute(arguments: [row[0] as Int64])
          try self.record(
            db,
            entity: .sale,
            guid: row[1],
            kind: .deleted,
            context: context,
            timeMillis: now
          )
        }
        return rows.count
      }
      deleted += count
      if count < chunk { return (deleted, false) }
    }
    let more = try self.readStatement { db in
      try Bool.fetchOne(
        db,
        sql: "SELECT EXISTS (SELECT 1 FROM sales WHERE date < ?)",
        arguments: [date]
      ) ?? false
    }
    return (deleted, more)
  }

  /// Up to `limit` sales after the sale id `after`, in id order (the order they were stored),
  /// with their employees' guids: one index range per page, in the interactive lane.
  public func salesPage(after: Int64?, limit: Int) async throws -> SalesPage {
    precondition(limit > 0)
    let rows = try await self.read(.interactive, statement: true) { db in
      try Row.fetchAll(
        db.cachedStatement(
          sql: """
            SELECT s.id, e.guid, s.amount_cents, s.date FROM sales s JOIN employees e ON e.id = s.employee_id
            WHERE s.id > ? ORDER BY s.id LIMIT ?
            """
        ),
        arguments: [after ?? 0, limit]
      ).map {
        (id: $0[0] as Int64, sale: SaleRow(employeeGUID: $0[1], amountCents: $0[2], date: $0[3]))
      }
    }
    return SalesPage(rows: rows.map(\.sale), next: rows.count < limit ? nil : rows.last?.id)
  }
}
