internal import Foundation
internal import RosterDomain
internal import RosterStore

/// The change feed's, the analytics' and the pictures' clauses.
extension StoreContract {
  static func changeFeedIsGaplessAndOrdered(_ store: Store) async throws {
    let start = store.latestChange
    let made = try await Self.create(store, Array(Self.names.prefix(4)))
    var changes = EmployeeChanges()
    changes.active = false
    _ = try await store.updateEmployee(
      guid: made[0].guid,
      changes: changes,
      context: WriteContext(author: "token:hr-feed", onBehalfOf: "ada")
    )
    try await store.deleteEmployee(guid: made[1].guid, context: Self.writer)
    let log = try await store.changes(after: start, limit: StoreLimits.maximumChangePage)
    try Self.require(
      log.map(\.sequence) == Array((start + 1) ... (start + 6)),
      "tokens without gaps, in order: \(log.map(\.sequence))"
    )
    try Self.require(store.latestChange == start + 6, "latestChange is the newest token")
    try Self.require(log.prefix(4).allSatisfy { $0.kind == .inserted }, "creates are inserts")
    try Self.require(
      log[4].kind == .updated && log[4].fields == ["active"] && log[4].author == "token:hr-feed"
        && log[4].onBehalfOf == "ada",
      "an update names its fields, its author and whom they acted for: \(log[4])"
    )
    try Self.require(log[5].onBehalfOf.isEmpty, "a write for no one else: \(log[5])")
    try Self.require(log[5].kind == .deleted && log[5].guid == made[1].guid, "a delete: \(log[5])")
    let tail = try await store.changes(after: start + 4, limit: 1)
    try Self.require(
      tail.map(\.sequence) == [start + 5],
      "a limited page after a token: \(tail.map(\.sequence))"
    )
    try await Self.requireError(.outOfRange, naming: "\(start + 100)", "a token past the end") {
      _ = try await store.changes(after: start + 100, limit: 10)
    }
  }

  static func watchersWakeOnCommit(_ store: Store) async throws {
    let start = store.latestChange
    let waiter = Task { try await store.waitForChanges(after: start) }
    // Most likely waiting by now; a commit before the wait began is seen at once, as well.
    try await Task.sleep(for: .milliseconds(50))
    _ = try await store.createEmployee(Self.person("Katherine Johnson"), context: Self.writer)
    let newest = try await Self.bounded("the watcher to wake", waiter)
    try Self.require(newest >= start + 1, "the watcher woke with \(newest), after \(start)")
  }

  /// A watch ends when the call it serves does (its client went away: `CallControl` is
  /// cancelled, not the task), with the call's cancellation, and no commit is needed for it.
  static func watchEndsWithItsCall(_ store: Store) async throws {
    let control = CallControl(deadline: nil)
    let waiter = Task {
      try await CallControl.$current.withValue(control) {
        try await store.waitForChanges(after: store.latestChange)
      }
    }
    try await Task.sleep(for: .milliseconds(50))
    control.cancel()
    do {
      let woke = try await Self.bounded("the cancelled watch to end", waiter)
      throw ContractViolation(description: "a cancelled watch woke with \(woke) instead of ending")
    } catch let error as StoreError {
      try Self.require(error.code == .cancelled, "a cancelled watch ended with \(error)")
    }
  }

  /// `task`'s value, or a `ContractViolation` naming `what` after 60 s: a wake-up that never
  /// comes fails the clause instead of hanging the run.
  static func bounded<T: Sendable>(_ what: String, _ task: Task<T, any Error>) async throws -> T {
    let timeout = Task {
      try await Task.sleep(for: .seconds(60))
      task.cancel()
    }
    defer { timeout.cancel() }
    do {
      return try await task.value
    } catch is CancellationError {
      throw ContractViolation(description: "timed out after 60 s waiting for \(what)")
    }
  }

  static func salesAreExactCents(_ store: Store) async throws {
    let made = try await Self.create(store, Array(Self.names.prefix(3)))
    let amounts: [Int64] = [1, 29, 435, 1_999, 100_000, 7]
    let sales = amounts.enumerated().map { index, cents in
      SaleRow(
        employeeGUID: made[index % 2].guid,
        amountCents: cents,
        date: "2024-0\(1 + index % 3)-1\(index)"
      )
    }
    let bad = [
      SaleRow(employeeGUID: made[0].guid, amountCents: -1, date: "2024-01-01"),
      SaleRow(
        employeeGUID: "00000000-0000-4000-8000-0000000000cc",
        amountCents: 5,
        date: "2024-01-01"
      ),
    ]
    let result = try await store.importSales(
      Self.stream([sales, bad]),
      context: Self.writer,
      chunkRows: 2
    )
    try Self.require(result.inserted == amounts.count, "inserted \(result.inserted)")
    try Self.require(
      result.rejected.map(\.index) == [6, 7],
      "rejected by index: \(result.rejected)"
    )
    let first = try await store.employeeSales(guid: made[0].guid)
    let expected = amounts.enumerated().filter { $0.offset % 2 == 0 }.map(\.element).reduce(0, +)
    try Self.require(
      first.count == 3 && first.totalCents == expected,
      "employee totals: \(first), expected \(expected)"
    )
    let sum = try await store.aggregateSales(
      .sum,
      groupedBy: .none,
      filter: SalesFilter(),
      page: AggregatePageRequest()
    )
    try Self.require(
      sum.groups.first?.value == Double(amounts.reduce(0, +)),
      "SUM over everything: \(sum)"
    )
    let median = try await store.aggregateSales(
      .median,
      groupedBy: .none,
      filter: SalesFilter(),
      page: AggregatePageRequest()
    )
    try Self.require(
      median.groups.first?.value == Double(29 + 435) / 2,
      "MEDIAN, the mean of the middle two: \(median)"
    )
    let byMonth = try await store.aggregateSales(
      .count,
      groupedBy: .month,
      filter: SalesFilter(),
      page: AggregatePageRequest(limit: 2)
    )
    try Self.require(
      byMonth.groups.map(\.key) == ["2024-01", "2024-02"] && byMonth.next == "2024-02",
      "a page of groups: \(byMonth)"
    )
    let calendar = try await store.salesCalendar(scope: .everyone, year: 2024, month: 1)
    let year = calendar.years.first { $0.year.number == 2024 }
    try Self.require(
      year?.year.amountCents == amounts.reduce(0, +),
      "the year's total: \(String(describing: year))"
    )
    try Self.require(
      year?.months.map(\.amountCents).reduce(0, +) == amounts.reduce(0, +),
      "the months add up to the year"
    )
    try Self.require(
      calendar.days.map(\.amountCents).reduce(0, +) == year?.months.first?.amountCents,
      "January's days add up"
    )
    let counts = try await store.departmentCounts()
    try Self.require(
      counts.map(\.headcount).reduce(0, +) == 3
        && counts.map(\.department) == counts.map(\.department).sorted(),
      "department counters: \(counts)"
    )
    try await Self.requireError(
      .notFound,
      naming: "00000000-0000-4000-8000-0000000000cc",
      "sales of an unknown guid"
    ) {
      _ = try await store.employeeSales(guid: "00000000-0000-4000-8000-0000000000cc")
    }
  }

  static func picturesRoundTrip(_ store: Store, _ fixtures: Fixtures) async throws {
    let made = try await store.createEmployee(Self.person("Radia Perlman"), context: Self.writer)
    let upload = try await store.beginPictureUpload(
      guid: made.guid,
      contentType: "image/jpeg",
      totalSize: Int64(fixtures.jpeg.count)
    )
    var offset = 0
    while offset < fixtures.jpeg.count {
      let end = min(offset + 10_000, fixtures.jpeg.count)
      try await upload.append(fixtures.jpeg[offset ..< end])
      offset = end
    }
    let stored = try await upload.finish(context: Self.writer)
    try Self.require(
      stored.info.size == Int64(fixtures.jpeg.count) && stored.info.contentType == "image/jpeg",
      "the stored picture: \(stored.info)"
    )
    let back = try await store.withPicture(guid: made.guid) { info, reader in
      var data = Data()
      while Int64(data.count) < info.size {
        let chunk = try await reader.read(offset: Int64(data.count), count: 65_536)
        if chunk.isEmpty { break }
        data += chunk
      }
      return data
    }
    try Self.require(back == fixtures.jpeg, "the picture reads back byte for byte")
    let thumbnail = try await store.thumbnail(guid: made.guid)
    try Self.require(
      thumbnail.etag == stored.info.etag && thumbnail.height == 120 && !thumbnail.data.isEmpty,
      "the thumbnail: \(thumbnail.width)x\(thumbnail.height), etag \(thumbnail.etag)"
    )
    let row = try await store.employee(guid: made.guid, fields: [.thumbnail, .pictureEtag])
    try Self.require(
      row.pictureEtag == stored.info.etag && row.thumbnail == thumbnail.data,
      "the row points at the picture"
    )
    try await store.deletePicture(guid: made.guid, context: Self.writer)
    try await Self.requireError(.notFound, naming: made.guid, "a read after the picture's delete") {
      _ = try await store.thumbnail(guid: made.guid)
    }
  }
}
