internal import PostgresNIO
public import RosterDomain

extension PostgresStore {
  // MARK: Bulk upsert

  /// Merges rows by guid as they arrive, `chunkRows` per transaction, each chunk written
  /// while the next one fills (`ChunkedWrites`). A new guid must carry name, department and
  /// start date; an existing one gets the fields its row sets (the request's values win). Bad
  /// rows are reported with their index and skipped.
  public func upsertEmployees<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext,
    chunkRows: Int?
  ) async throws -> ImportSummary where Rows.Element == [UpsertRow] {
    try await ChunkedWrites.run(
      messages,
      chunkRows: chunkRows ?? self.configuration.bulkChunkRows
    ) { row, index in
      (index: index, row: try row.checked())
    } write: { chunk in
      try await self.upsertChunk(chunk, context: context)
    }
  }

  /// Writes one chunk of validated rows in one transaction: the existing rows read (and
  /// locked) with one statement, then each row inserted or updated.
  private func upsertChunk(
    _ rows: [(index: Int, row: UpsertRow)],
    context: WriteContext
  ) async throws -> ImportSummary {
    try await self.transaction { transaction in
      var summary = ImportSummary()
      let now = Self.nowMillis()
      var builder = SQLBuilder()
      builder.sql =
        PostgresEmployeeSQL.select(.editable.union(.guid))
        + " WHERE e.guid = ANY(\(builder.bind(rows.map(\.row.guid)))) ORDER BY e.id FOR UPDATE OF e"
      var existing: [String: Employee] = [:]
      for row in try await transaction.rows(builder.query) {
        let employee = try PostgresEmployeeSQL.decode(row, .editable.union(.guid)).0
        existing[employee.guid] = employee
      }
      var inserts: [Employee] = []
      var inserting: Set<String> = []
      for (index, row) in rows {
        if let old = existing[row.guid] {
          summary.updated += 1
          var new = row.changes.applied(to: old)
          let paths = EmployeeChanges.differences(old, new)
          if paths.isEmpty { continue }
          try await Self.update(id: old.id, to: new, paths: paths, now: now, in: transaction)
          transaction.record(
            .employee,
            guid: row.guid,
            kind: .updated,
            fields: paths.map(\.rawValue),
            context: context,
            timeMillis: now
          )
          new.id = old.id
          existing[row.guid] = new
        } else if inserting.contains(row.guid) {
          // The same new guid twice in one chunk: the later row's fields win, as an update.
          let position = inserts.lastIndex { $0.guid == row.guid }!
          let new = row.changes.applied(to: inserts[position])
          if new != inserts[position] { inserts[position] = new }
          summary.updated += 1
        } else {
          do {
            inserts.append(try row.newEmployee())
          } catch let error as StoreError {
            summary.reject(index: index, reason: error.message)
            continue
          }
          inserting.insert(row.guid)
        }
      }
      // The new rows in one statement.
      if !inserts.isEmpty {
        let inserted = try await transaction.rows(
          """
          INSERT INTO employees (guid, name, name_folded, department, email, phone, address, about,
            active, start_date, vacation_days, update_time)
          SELECT guid, name, folded, department, email, phone, address, about, active, start_date, days, \(now)
          FROM unnest(\(inserts.map(\.guid))::text[], \(inserts.map(\.name))::text[],
                      \(inserts.map { TextFolding.fold($0.name) })::text[], \(inserts.map(\.department))::text[],
                      \(inserts.map(\.email))::text[], \(inserts.map(\.phone))::text[], \(inserts.map(\.address))::text[],
                      \(inserts.map(\.about))::text[], \(inserts.map(\.active))::bool[], \(inserts.map(\.startDate))::text[],
                      \(inserts.map { Int32(clamping: $0.vacationDays) })::int4[])
            WITH ORDINALITY AS u(guid, name, folded, department, email, phone, address, about, active, start_date, days, ord)
          ORDER BY ord
          ON CONFLICT (guid) DO NOTHING
          RETURNING guid
          """
        )
        guard inserted.count == inserts.count else {
          // Created meanwhile by another replica's transaction, which committed first.
          throw StoreError(
            .unavailable,
            "some guids were created concurrently; send the rows again"
          )
        }
        for employee in inserts {
          transaction.record(
            .employee,
            guid: employee.guid,
            kind: .inserted,
            context: context,
            timeMillis: now
          )
        }
        summary.inserted += inserts.count
      }
      return summary
    }
  }

  // MARK: Sales writes

  /// Inserts sales as they stream in, `chunkRows` (default 5,000) per transaction, each
  /// chunk written while the next one fills (`ChunkedWrites`); bad rows are reported with
  /// their index and skipped.
  public func importSales<Rows: AsyncSequence & SendableMetatype>(
    _ messages: sending Rows,
    context: WriteContext,
    chunkRows: Int?
  ) async throws -> ImportSummary where Rows.Element == [SaleRow] {
    let latest = SaleChecks.latestSaleDate()
    return try await ChunkedWrites.run(messages, chunkRows: chunkRows ?? 5_000) { sale, index in
      (
        index: index, guid: try SaleChecks.check(sale, latest: latest).get(),
        cents: sale.amountCents, date: sale.date
      )
    } write: { chunk in
      try await self.insertSales(chunk, context: context)
    }
  }

  /// Inserts a chunk of checked sales with one set-based statement over arrays, which also
  /// names the rows whose guid no employee has.
  ///
  /// Each sale finds its employee through the guid index, in a subquery of its own: as a
  /// join, PostgreSQL weighed the chunk's thousands of guids against the table and chose a
  /// hash join over a scan of every employee, for every chunk (docs/performance.md, "Moving
  /// a directory between backends").
  private func insertSales(
    _ rows: [(index: Int, guid: String, cents: Int64, date: String)],
    context: WriteContext
  ) async throws -> ImportSummary {
    try await self.transaction { transaction in
      let unknown = Set(
        try await transaction.rows(
          """
          WITH given AS (
            SELECT u.ord, u.cents, u.date, (SELECT e.id FROM employees e WHERE e.guid = u.guid) AS id
            FROM unnest(\(rows.map(\.guid))::text[], \(rows.map(\.cents))::int8[], \(rows.map(\.date))::text[])
              WITH ORDINALITY AS u(guid, cents, date, ord)
          ), inserted AS (
            INSERT INTO sales (employee_id, amount_cents, date)
            SELECT id, cents, date FROM given WHERE id IS NOT NULL ORDER BY ord
          )
          SELECT ord FROM given WHERE id IS NULL
          """
        )
        .map { Int(try $0[0].decode(Int64.self)) - 1 }
      )
      let now = Self.nowMillis()
      var summary = ImportSummary()
      for (position, row) in rows.enumerated() {
        if unknown.contains(position) {
          summary.reject(index: row.index, reason: "no employee with guid '\(row.guid)'")
        } else {
          transaction.record(
            .sale,
            guid: row.guid,
            kind: .inserted,
            fields: ["amount", "date"],
            context: context,
            timeMillis: now
          )
          summary.inserted += 1
        }
      }
      return summary
    }
  }

  /// Deletes up to `limit` sales dated before `date`, 5,000 per transaction.
  public func deleteSales(
    before date: String,
    limit: Int,
    context: WriteContext
  ) async throws -> (deleted: Int, more: Bool) {
    var deleted = 0
    while deleted < limit {
      let chunk = min(5_000, limit - deleted)
      let count = try await self.transaction { transaction in
        let guids = try await transaction.rows(
          """
          WITH gone AS (
            DELETE FROM sales WHERE id IN (
              SELECT id FROM sales WHERE date < \(date) LIMIT \(chunk) FOR UPDATE SKIP LOCKED)
            RETURNING employee_id
          )
          SELECT e.guid FROM gone JOIN employees e ON e.id = gone.employee_id
          """
        ).map { try $0[0].decode(String.self) }
        let now = Self.nowMillis()
        for guid in guids {
          transaction.record(.sale, guid: guid, kind: .deleted, context: context, timeMillis: now)
        }
        return guids.count
      }
      deleted += count
      if count < chunk { break }
    }
    let more =
      try await self.row("SELECT EXISTS (SELECT 1 FROM sales WHERE date < \(date))")?[0].decode(
        Bool.self
      ) ?? false
    return (deleted, more)
  }

  /// Up to `limit` sales after the sale id `after`, in id order (the order they were stored),
  /// with their employees' guids: one index range per page.
  public func salesPage(after: Int64?, limit: Int) async throws -> SalesPage {
    precondition(limit > 0)
    let start = after ?? 0
    let rows = try await self.rows(
      """
      SELECT s.id, e.guid, s.amount_cents, s.date FROM sales s JOIN employees e ON e.id = s.employee_id
      WHERE s.id > \(start) ORDER BY s.id LIMIT \(limit)
      """
    )
    var sales: [SaleRow] = []
    sales.reserveCapacity(rows.count)
    var last: Int64? = nil
    for row in rows {
      last = try row[0].decode(Int64.self)
      sales.append(
        SaleRow(
          employeeGUID: try row[1].decode(String.self),
          amountCents: try row[2].decode(Int64.self),
          date: try row[3].decode(String.self)
        )
      )
    }
    return SalesPage(rows: sales, next: rows.count < limit ? nil : last)
  }
}
