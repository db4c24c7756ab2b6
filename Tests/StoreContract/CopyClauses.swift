internal import Foundation
internal import RosterDomain
internal import RosterStore

extension StoreContract {
  /// What `roster copy` reads and writes: sales in pages, in the order they were stored, and
  /// pictures pointed at content the store already holds.
  static func copyReadsSalesAndReferencesPictures(_ store: Store, _ fixtures: Fixtures) async throws
  {
    let made = try await Self.create(store, Array(Self.names.prefix(3)))
    let sales = (0 ..< 7).map {
      SaleRow(
        employeeGUID: made[$0 % 3].guid,
        amountCents: Int64(100 + $0),
        date: "2024-03-0\(1 + $0)"
      )
    }
    _ = try await store.importSales(Self.stream([sales]), context: Self.writer, chunkRows: nil)
    var read: [SaleRow] = []
    var position: Int64? = nil
    var pages = 0
    repeat {
      let page = try await store.salesPage(after: position, limit: 3)
      try Self.require(page.rows.count <= 3, "a page of \(page.rows.count) sales, limit 3")
      read += page.rows
      position = page.next
      pages += 1
      try Self.require(pages <= 4, "the pages of sales never end")
    } while position != nil
    try Self.require(
      read == sales,
      "sales in pages, in the order stored: \(read.map(\.amountCents))"
    )

    let (owner, sharer, other) = (made[0].guid, made[1].guid, made[2].guid)
    let upload = try await store.beginPictureUpload(guid: owner, contentType: "", totalSize: 0)
    try await upload.append(fixtures.jpeg)
    let stored = try await upload.finish(context: Self.writer)
    let unknownContent = String(repeating: "0", count: 64)
    try await Self.requireError(
      .notFound,
      naming: "00000000-0000-4000-8000-0000000000dd",
      "an unknown employee"
    ) {
      _ = try await store.attachPictures(
        [
          (guid: sharer, etag: stored.info.etag),
          (guid: "00000000-0000-4000-8000-0000000000dd", etag: stored.info.etag),
        ],
        context: Self.writer
      )
    }
    try Self.require(
      try await store.employee(guid: sharer, fields: [.pictureEtag]).pictureEtag == nil,
      "a refused attach changed an employee"
    )
    let attached = try await store.attachPictures(
      [
        (guid: sharer, etag: stored.info.etag), (guid: other, etag: unknownContent),
        (guid: owner, etag: stored.info.etag),
      ],
      context: Self.writer
    )
    try Self.require(
      attached == [sharer, owner],
      "attached \(attached), expected the sharer and the owner"
    )
    let rows = try await store.employees(
      guids: [owner, sharer, other],
      fields: [.pictureEtag, .thumbnail]
    )
    try Self.require(
      rows[1].pictureEtag == stored.info.etag && rows[1].thumbnail == rows[0].thumbnail
        && rows[1].thumbnail != nil,
      "the sharer points at the content with its thumbnail"
    )
    try Self.require(
      rows[2].pictureEtag == nil && rows[2].thumbnail == nil,
      "content the store lacks was attached"
    )
    // The content stays while one employee refers to it.
    try await store.deletePicture(guid: owner, context: Self.writer)
    let back = try await store.withPicture(guid: sharer) { info, reader in
      try await reader.read(offset: 0, count: Int(info.size))
    }
    try Self.require(
      back == fixtures.jpeg,
      "the sharer's picture reads back byte for byte after the owner's delete"
    )
  }
}

extension StoreContract {
  /// A bulk write with more refused rows than a summary lists counts them all and lists the
  /// first thousand, in input order, so its reply stays bounded; the good rows still land.
  static func bulkRefusalsAreCountedAndBounded(_ store: Store) async throws {
    let listed = ImportSummary.listedRejections
    var rows: [UpsertRow] = (0 ..< (listed + 500)).map { _ in
      var changes = EmployeeChanges()
      changes.email = "nameless@example.com"
      return UpsertRow(guid: UUID().uuidString.lowercased(), changes: changes)
    }
    let good = Self.person("Barbara Liskov")
    rows.append(UpsertRow(guid: good.guid, changes: EmployeeChanges(setting: good)))
    let summary = try await store.upsertEmployees(
      Self.stream([rows]),
      context: Self.writer,
      chunkRows: 400
    )
    try Self.require(
      summary.inserted == 1,
      "inserted \(summary.inserted), expected the one good row"
    )
    try Self.require(
      summary.rejectedCount == listed + 500,
      "counted \(summary.rejectedCount) refusals of \(listed + 500)"
    )
    try Self.require(
      summary.rejected.map(\.index) == Array(0 ..< listed),
      "listed \(summary.rejected.count) refusals, expected the first \(listed) in order"
    )
    let sales =
      (0 ..< (listed + 200)).map { _ in
        SaleRow(employeeGUID: good.guid, amountCents: -5, date: "2024-01-01")
      }
      + [SaleRow(employeeGUID: good.guid, amountCents: 5, date: "2024-01-01")]
    let imported = try await store.importSales(
      Self.stream([sales]),
      context: Self.writer,
      chunkRows: 300
    )
    try Self.require(
      imported.inserted == 1 && imported.rejectedCount == listed + 200,
      "sales: \(imported.inserted) in, \(imported.rejectedCount) refused"
    )
    try Self.require(
      imported.rejected.map(\.index) == Array(0 ..< listed),
      "sales listed \(imported.rejected.count) refusals"
    )
  }

  /// A bulk load into an empty directory logs no change per row: the log reads as pruned
  /// through one number past its end before the load, so a watcher from before it lists again
  /// (`outOfRange`) and one from after it follows on. A load into a directory with rows logs
  /// each change, as any write does.
  static func bulkLoadIsLoggedAsOneGap(_ store: Store) async throws {
    // History first, then an empty directory again.
    let gone = try await Self.create(store, ["Edsger Dijkstra"])[0]
    try await store.deleteEmployee(guid: gone.guid, context: Self.writer)
    let before = store.latestChange
    let people = Self.names.prefix(3).map { Self.person($0) }
    try await store.withBulkLoad {
      let rows = people.map { UpsertRow(guid: $0.guid, changes: EmployeeChanges(setting: $0)) }
      _ = try await store.upsertEmployees(Self.stream([rows]), context: Self.writer, chunkRows: 2)
      let sales = people.map {
        SaleRow(employeeGUID: $0.guid, amountCents: 250, date: "2024-05-01")
      }
      _ = try await store.importSales(Self.stream([sales]), context: Self.writer, chunkRows: 2)
    }
    try Self.require(
      store.latestChange == before + 1,
      "a bulk load of 3 employees and 3 sales moved the log from \(before) to \(store.latestChange), not by one"
    )
    try await Self.requireError(.outOfRange, naming: "pruned", "a token from before the load") {
      _ = try await store.changes(after: before, limit: 10)
    }
    let after = try await store.changes(after: before + 1, limit: 10)
    try Self.require(after.isEmpty, "after the gap, nothing yet: \(after)")
    let loaded = try await store.employees(guids: people.map(\.guid), fields: [.guid])
    try Self.require(loaded.count == 3, "the load's rows are there: \(loaded.count)")

    // A write after the load is logged after the gap; so is each row of a load into a
    // directory with rows.
    let next = Self.person("Niklaus Wirth")
    try await store.withBulkLoad {
      _ = try await store.upsertEmployees(
        Self.stream([[UpsertRow(guid: next.guid, changes: EmployeeChanges(setting: next))]]),
        context: Self.writer,
        chunkRows: nil
      )
    }
    let logged = try await store.changes(after: before + 1, limit: 10)
    try Self.require(
      logged.map(\.sequence) == [before + 2] && logged.first?.guid == next.guid
        && logged.first?.kind == .inserted,
      "a load into a directory with rows logs its row after the gap: \(logged)"
    )
  }
}
