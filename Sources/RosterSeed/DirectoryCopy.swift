internal import Foundation
public import RosterDomain
public import RosterStore

/// `roster copy`: every employee, picture, thumbnail and sale of one backend into another,
/// through the store seam alone, so it runs between any two backends (SQLite to PostgreSQL
/// and back).
///
/// - Streamed: a page of employees, a page of sales or a picture's chunk at a time, so memory
///   stays flat whatever the size of the directory.
/// - Resumable: each step commits in order, so after an interruption the target holds a
///   prefix of each step's stream. Run again with `resume`, the copy counts what the target
///   has, skips that much of the source and goes on; pictures are compared by content hash
///   and sent only when the target's differs.
/// - Checked: `verify` compares every employee (pictures and thumbnails by their bytes' hash,
///   the sales counter with them), the department counters and the sales calendars.
///
/// The source must not change while the copy runs: copy from a stopped server or from a
/// `roster backup`. Guids, pictures and sales are kept; row ids, update times and the change
/// log are the target's own.
///
/// ```swift
/// let copy = DirectoryCopy(context: WriteContext(author: "roster copy"))
/// let report = try await copy.copy(from: sqlite, to: postgres, resume: false)
/// let problems = try await copy.verify(source: sqlite, target: postgres)
/// ```
public struct DirectoryCopy: Sendable {
  /// The author the target's change log records.
  public var context: WriteContext
  /// Employees read per page.
  public var employeePage: Int
  /// Sales read per page.
  public var salesPage: Int
  /// Pictures copied at once.
  public var pictureConcurrency: Int
  /// Told each step as it starts and ends.
  public var progress: @Sendable (String) -> Void
  /// Where the employees' and sales' steps show how far they have got (`ProgressMeter`).
  public var meters: ProgressMeter.Output

  public init(
    context: WriteContext,
    employeePage: Int = 500,
    salesPage: Int = 5_000,
    pictureConcurrency: Int = 4,
    progress: @escaping @Sendable (String) -> Void = { _ in },
    meters: ProgressMeter.Output = .silent
  ) {
    precondition(employeePage > 0 && employeePage <= StoreLimits.maximumPageSize && salesPage > 0)
    self.context = context
    self.employeePage = employeePage
    self.salesPage = salesPage
    self.pictureConcurrency = max(1, pictureConcurrency)
    self.progress = progress
    self.meters = meters
  }

  /// What a copy did.
  public struct Report: Sendable {
    /// Employees written, and those the target already had from an earlier run.
    public var employeesCopied = 0
    public var employeesSkipped = 0
    /// Pictures copied, how many of them had their bytes sent (the rest reused content the
    /// target already held), and those the target already had.
    public var picturesCopied = 0
    public var picturesSent = 0
    public var picturesSkipped = 0
    /// Sales written, and those the target already had from an earlier run.
    public var salesCopied = 0
    public var salesSkipped = 0
  }

  /// Why a copy stopped.
  public struct Failure: Error, CustomStringConvertible {
    public var description: String
  }

  /// The fields a copy carries; the rest are the target's own.
  static let editable: EmployeeFields = [
    .guid, .name, .department, .email, .phone, .address, .about, .active, .startDate, .vacationDays,
  ]

  /// Copies `source` into `target`: employees, then pictures, then sales, in one bulk load
  /// whose end builds what derives from the rows once (`StoreBackend.withBulkLoad`).
  ///
  /// - Parameter resume: whether `target` may already hold part of this copy. Without it, a
  ///   target with any employee or sale is refused.
  public func copy(
    from source: some StoreBackend,
    to target: some StoreBackend,
    resume: Bool
  ) async throws -> Report {
    let haveEmployees = try await target.countEmployees(filter: EmployeeFilter())
    let haveSales = try await Self.salesCount(target)
    if !resume && (haveEmployees > 0 || haveSales > 0) {
      throw Failure(
        description: "the target already holds \(haveEmployees) employees and \(haveSales) sales; "
          + "copy into an empty database, or pass --resume to go on with a copy that was interrupted"
      )
    }
    let clock = ContinuousClock()
    let (report, ended) = try await target.withBulkLoad {
      let report = try await self.steps(
        from: source,
        to: target,
        haveEmployees: haveEmployees,
        haveSales: haveSales
      )
      return (report, clock.now)
    }
    self.progress("indexes, counters and rollups: built in \(Self.seconds(clock.now - ended))")
    return report
  }

  /// The employees after the first `haveEmployees`, the pictures the target lacks, and the
  /// sales after the first `haveSales`.
  private func steps(
    from source: some StoreBackend,
    to target: some StoreBackend,
    haveEmployees: Int64,
    haveSales: Int64
  ) async throws -> Report {
    var report = Report()
    let clock = ContinuousClock()
    var started = clock.now
    func took() -> String {
      defer { started = clock.now }
      return Self.seconds(clock.now - started)
    }

    self.progress("employees: skipping the \(haveEmployees) the target has")
    let employeeMeter = ProgressMeter(
      "employees",
      total: try await source.countEmployees(filter: EmployeeFilter()) - haveEmployees,
      output: self.meters
    )
    let rows = MeteredBatches(
      Self.employeeRows(source, skip: Int(haveEmployees), pageSize: self.employeePage),
      meter: employeeMeter
    )
    let summary = try await target.upsertEmployees(rows, context: self.context, chunkRows: nil)
    employeeMeter.finish()
    try Self.requireWhole(summary, of: "employees")
    report.employeesSkipped = Int(haveEmployees)
    report.employeesCopied = summary.imported
    self.progress("employees: copied \(summary.imported) in \(took())")

    (report.picturesCopied, report.picturesSent, report.picturesSkipped) =
      try await self.copyPictures(
        from: source,
        to: target
      )
    self.progress(
      "pictures: copied \(report.picturesCopied) (bytes sent for \(report.picturesSent)), "
        + "already there \(report.picturesSkipped), in \(took())"
    )

    self.progress("sales: skipping the \(haveSales) the target has")
    let salesMeter = ProgressMeter(
      "sales",
      total: try await Int64(Self.salesCount(source)) - haveSales,
      output: self.meters
    )
    let sales = MeteredBatches(
      Self.saleRows(source, skip: Int(haveSales), pageSize: self.salesPage),
      meter: salesMeter
    )
    let imported = try await target.importSales(sales, context: self.context, chunkRows: nil)
    salesMeter.finish()
    try Self.requireWhole(imported, of: "sales")
    report.salesSkipped = Int(haveSales)
    report.salesCopied = imported.inserted
    self.progress("sales: copied \(imported.inserted) in \(took())")
    return report
  }

  static func seconds(_ duration: Duration) -> String {
    let elapsed = duration.components
    return String(format: "%.1f s", Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18)
  }

  /// Every employee's picture whose content hash differs in the target, `pictureConcurrency`
  /// at a time: by reference to content the target already holds, or streamed in chunks.
  private func copyPictures(
    from source: some StoreBackend,
    to target: some StoreBackend
  ) async throws -> (copied: Int, sent: Int, skipped: Int) {
    var copied = 0
    var sent = 0
    var skipped = 0
    var cursor: EmployeeCursor? = nil
    repeat {
      let page = try await source.employeePage(
        fields: [.guid, .pictureEtag],
        filter: EmployeeFilter(),
        order: .name,
        after: cursor,
        limit: self.employeePage
      )
      cursor = page.next
      let pictured = page.employees.filter { $0.pictureEtag != nil }
      if pictured.isEmpty { continue }
      let there = try await target.employees(
        guids: pictured.map(\.guid),
        fields: [.guid, .pictureEtag]
      )
      let have = Dictionary(
        there.map { ($0.guid, $0.pictureEtag) },
        uniquingKeysWith: { a, _ in a }
      )
      let wanted = pictured.filter { have[$0.guid] != .some($0.pictureEtag) }
      skipped += pictured.count - wanted.count
      if wanted.isEmpty { continue }
      // By reference first, in one write; the rest have their bytes sent.
      let attached = try await target.attachPictures(
        wanted.map { (guid: $0.guid, etag: $0.pictureEtag ?? "") },
        context: self.context
      )
      copied += attached.count
      // One employee's picture per content the target lacks is sent; the others then refer
      // to it.
      var firstOfContent = Set<String>()
      let unsent = wanted.filter {
        !attached.contains($0.guid) && firstOfContent.insert($0.pictureEtag ?? "").inserted
      }
      let rest = wanted.filter { !attached.contains($0.guid) && !unsent.contains($0) }
      try await withThrowingTaskGroup(of: Void.self) { group in
        var next = unsent.makeIterator()
        func add() -> Bool {
          guard let employee = next.next() else { return false }
          group.addTask { try await self.sendPicture(employee, from: source, to: target) }
          return true
        }
        for _ in 0 ..< self.pictureConcurrency { _ = add() }
        while try await group.next() != nil {
          copied += 1
          sent += 1
          _ = add()
        }
      }
      if rest.isEmpty { continue }
      let late = try await target.attachPictures(
        rest.map { (guid: $0.guid, etag: $0.pictureEtag ?? "") },
        context: self.context
      )
      if let lost = rest.first(where: { !late.contains($0.guid) }) {
        throw Failure(
          description:
            "the picture of \(lost.guid) could not refer to content the target was just sent"
        )
      }
      copied += late.count
    } while cursor != nil
    return (copied, sent, skipped)
  }

  /// One picture streamed from `source` through `target`'s upload pipeline, which checks it
  /// and reuses a thumbnail already made from the same bytes.
  private func sendPicture(
    _ employee: Employee,
    from source: some StoreBackend,
    to target: some StoreBackend
  ) async throws {
    let context = self.context
    let etag = try await source.withPicture(guid: employee.guid) { info, reader in
      let upload = try await target.beginPictureUpload(
        guid: employee.guid,
        contentType: info.contentType,
        totalSize: info.size
      )
      do {
        var offset: Int64 = 0
        while offset < info.size {
          let chunk = try await reader.read(offset: offset, count: 1 << 20)
          if chunk.isEmpty { break }
          try await upload.append(chunk)
          offset += Int64(chunk.count)
        }
        return try await upload.finish(context: context).info.etag
      } catch {
        upload.abandon()
        throw error
      }
    }
    if etag != employee.pictureEtag {
      throw Failure(
        description:
          "the picture of \(employee.guid) arrived as \(etag), not \(employee.pictureEtag ?? "")"
      )
    }
  }

  /// Stops the copy at a row the target refused: a copy is whole or it is not done.
  static func requireWhole(_ summary: ImportSummary, of what: String) throws {
    guard let first = summary.rejected.first else { return }
    throw Failure(
      description:
        "the target refused \(summary.rejectedCount) \(what); the first, at \(first.index): \(first.reason)"
    )
  }

  /// A backend's number of sales, from its yearly totals.
  static func salesCount(_ store: some AnalyticsStore) async throws -> Int64 {
    try await store.salesCalendar(scope: .everyone, year: nil, month: nil).years.reduce(0) {
      $0 + $1.year.count
    }
  }
}

extension DirectoryCopy {
  /// Rows read a page at a time through `fetch` (nil for the first page; a page with no next
  /// position is the last), after skipping the first `skip` rows.
  struct PagedRows<Row: Sendable, Position: Sendable>: AsyncSequence, Sendable {
    typealias Element = [Row]
    let skip: Int
    let fetch: @Sendable (Position?) async throws -> (rows: [Row], next: Position?)

    func makeAsyncIterator() -> Iterator {
      Iterator(skip: self.skip, fetch: self.fetch)
    }

    struct Iterator: AsyncIteratorProtocol {
      var skip: Int
      let fetch: @Sendable (Position?) async throws -> (rows: [Row], next: Position?)
      var position: Position? = nil
      var done = false

      init(
        skip: Int,
        fetch: @escaping @Sendable (Position?) async throws -> (rows: [Row], next: Position?)
      ) {
        self.skip = skip
        self.fetch = fetch
      }

      mutating func next() async throws -> [Row]? {
        while !self.done {
          let page = try await self.fetch(self.position)
          self.position = page.next
          self.done = page.next == nil
          let dropped = Swift.min(self.skip, page.rows.count)
          self.skip -= dropped
          if dropped < page.rows.count { return Array(page.rows.dropFirst(dropped)) }
        }
        return nil
      }
    }
  }

  /// `source`'s employees as upsert rows, by name, after the first `skip`.
  static func employeeRows(
    _ source: some DirectoryStore,
    skip: Int,
    pageSize: Int
  ) -> PagedRows<UpsertRow, EmployeeCursor> {
    PagedRows(skip: skip) { cursor in
      let page = try await source.employeePage(
        fields: Self.editable,
        filter: EmployeeFilter(),
        order: .name,
        after: cursor,
        limit: pageSize
      )
      return (
        page.employees.map { UpsertRow(guid: $0.guid, changes: EmployeeChanges(setting: $0)) },
        page.next
      )
    }
  }

  /// `source`'s sales in the order they were stored, after the first `skip`.
  static func saleRows(
    _ source: some AnalyticsStore,
    skip: Int,
    pageSize: Int
  ) -> PagedRows<SaleRow, Int64> {
    PagedRows(skip: skip) { position in
      let page = try await source.salesPage(after: position, limit: pageSize)
      return (page.rows, page.next)
    }
  }
}
