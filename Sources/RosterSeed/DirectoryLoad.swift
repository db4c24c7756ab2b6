internal import Foundation
public import RosterDomain
internal import RosterPictures
public import RosterStore

/// Where a load's data comes from: a seed file with its pictures and sales
/// (`SeedFileSource`), or the demo generators (`DemoSource`).
public protocol DirectorySource: Sendable {
  associatedtype Employees: AsyncSequence & Sendable & SendableMetatype
  where Employees.Element == [UpsertRow]
  associatedtype Sales: AsyncSequence & Sendable & SendableMetatype where Sales.Element == [SaleRow]

  /// The employees, in batches.
  func employees() throws -> Employees

  associatedtype Pictures: AsyncSequence & Sendable & SendableMetatype
  where Pictures.Element == [PictureFile]

  /// Runs `body` with the pictures to store, in batches, read as they are taken; the files
  /// need exist only while `body` runs.
  func withPictures<T>(_ body: (Pictures) async throws -> T) async throws -> T

  /// The sales, in batches; nil for none.
  func sales() throws -> Sales?

  /// How many employees `employees()` gives, when known without reading them (for the time
  /// left on the progress meter).
  var employeeCount: Int64? { get }
}

extension DirectorySource {
  public var employeeCount: Int64? { nil }
}

/// What a load did, step by step.
public struct LoadReport: Sendable {
  /// The employees merged, and the rows refused with their index and reason.
  public var employees = ImportSummary()
  public var employeesTime = Duration.zero
  /// Pictures stored, and those refused (the first thousand listed with the guid and reason).
  public var picturesStored = 0
  public var picturesRefused: [(guid: String, reason: String)] = []
  public var picturesRefusedCount = 0
  public var picturesTime = Duration.zero
  /// Sales inserted and refused (the first thousand refusals listed with their index and
  /// reason); nil when there were none to load.
  public var sales: ImportSummary? = nil
  public var salesTime = Duration.zero
  /// The end of the bulk load: indexes, counters and rollups built from the rows
  /// (`StoreBackend.withBulkLoad`).
  public var rebuildTime = Duration.zero
}

/// The one import path, for `roster import` and for the demo data a new database starts
/// with, in one bulk load (`StoreBackend.withBulkLoad`): the employees, then their pictures
/// through the upload pipeline, then the sales, each streamed in chunks that commit on their
/// own. A refused row or picture is reported and skips only itself.
///
/// ```swift
/// let report = try await DirectoryLoader(context: WriteContext(author: "import"))
///   .load(try SeedFileSource(file: "seed.json"), into: store)
/// ```
public struct DirectoryLoader: Sendable {
  /// The author and origin the change log records.
  public var context: WriteContext
  /// Employees per transaction; nil for the backend's default.
  public var employeeChunkRows: Int?
  /// Pictures thumbnailed at once.
  public var pictureConcurrency: Int
  /// Where each step shows how far it has got (`ProgressMeter`).
  public var progress: ProgressMeter.Output

  public init(
    context: WriteContext,
    employeeChunkRows: Int? = 20_000,
    pictureConcurrency: Int = 2,
    progress: ProgressMeter.Output = .silent
  ) {
    self.context = context
    self.employeeChunkRows = employeeChunkRows
    self.pictureConcurrency = pictureConcurrency
    self.progress = progress
  }

  /// Loads `source` into `store`, in one bulk load: its end builds what derives from the
  /// rows once (on PostgreSQL it also vacuums and analyzes, which the first reads' plans and
  /// index-only scans need).
  public func load(
    _ source: some DirectorySource,
    into store: some StoreBackend
  ) async throws -> LoadReport {
    let clock = ContinuousClock()
    var (report, ended) = try await store.withBulkLoad {
      let report = try await self.steps(source, into: store)
      return (report, clock.now)
    }
    report.rebuildTime = clock.now - ended
    return report
  }

  /// The employees, then their pictures, then the sales.
  private func steps(
    _ source: some DirectorySource,
    into store: some StoreBackend
  ) async throws -> LoadReport {
    var report = LoadReport()
    let clock = ContinuousClock()
    var started = clock.now
    let employeeMeter = ProgressMeter(
      "employees",
      total: source.employeeCount,
      output: self.progress
    )
    let employees = MeteredBatches(try source.employees(), meter: employeeMeter)
    report.employees = try await store.upsertEmployees(
      employees,
      context: self.context,
      chunkRows: self.employeeChunkRows
    )
    employeeMeter.finish()
    report.employeesTime = clock.now - started
    started = clock.now
    let pictures = try await source.withPictures { files in
      let meter = ProgressMeter("pictures", output: self.progress)
      defer { meter.finish() }
      return try await store.importPictures(
        MeteredBatches(files, meter: meter),
        concurrency: self.pictureConcurrency,
        context: self.context
      )
    }
    report.picturesStored = pictures.stored
    report.picturesRefused = pictures.refused
    report.picturesRefusedCount = pictures.refusedCount
    report.picturesTime = clock.now - started
    if let sales = try source.sales() {
      started = clock.now
      let meter = ProgressMeter("sales", output: self.progress)
      report.sales = try await store.importSales(
        MeteredBatches(sales, meter: meter),
        context: self.context,
        chunkRows: nil
      )
      meter.finish()
      report.salesTime = clock.now - started
    }
    return report
  }
}

/// A seed file (`seed.json`), the pictures its records name, and a sales file.
public struct SeedFileSource: DirectorySource {
  /// The seed file.
  public var file: String
  /// Where the files named by `picture` are.
  public var picturesDirectory: String
  /// The sales file; nil for none.
  public var salesFile: String?

  /// A seed file with `pictures` and, when present, `sales.csv` beside it, unless told
  /// otherwise.
  public init(file: String, picturesDirectory: String? = nil, salesFile: String? = nil) {
    self.file = file
    self.picturesDirectory = picturesDirectory ?? SeedFile.picturesDirectory(beside: file)
    let besideSales = SalesFile.path(beside: file)
    self.salesFile =
      salesFile ?? (FileManager.default.fileExists(atPath: besideSales) ? besideSales : nil)
  }

  public func employees() throws -> SeedFile.Batches {
    try SeedFile.batches(self.file)
  }

  public func withPictures<T>(_ body: (SeedFile.Pictures) async throws -> T) async throws -> T {
    try await body(try SeedFile.pictures(self.file, in: self.picturesDirectory))
  }

  public func sales() throws -> SalesFile.Batches? {
    try self.salesFile.map { try SalesFile.batches($0) }
  }
}

/// The demo directory: `DemoData`'s employees, pictures from `DemoPictures`' pool (made in a
/// scratch directory and removed after, or kept in a directory that outlives the load), and
/// `DemoSales`.
public struct DemoSource: DirectorySource {
  /// The employees.
  public var demo: DemoData
  /// Where the picture pool is made for the load; nil for no pictures.
  public var pictureScratch: String?
  /// Whether `pictureScratch` is kept after the load, so that the next load reuses the pool
  /// instead of making it again (several seconds of libvips for its largest pictures).
  public var keepsPictures: Bool
  /// Mean sales per employee; 0 for none.
  public var salesPerEmployee: Int

  public init(
    demo: DemoData,
    pictureScratch: String?,
    keepsPictures: Bool = false,
    salesPerEmployee: Int
  ) {
    self.demo = demo
    self.pictureScratch = pictureScratch
    self.keepsPictures = keepsPictures
    self.salesPerEmployee = salesPerEmployee
  }

  public func employees() -> AsyncBatches<DemoRows> {
    AsyncBatches(DemoRows(demo: self.demo), size: 1_000)
  }

  public var employeeCount: Int64? { Int64(self.demo.count) }

  public func withPictures<T>(
    _ body: (AsyncBatches<DemoPictureFiles>) async throws -> T
  ) async throws -> T {
    guard let scratch = self.pictureScratch, self.demo.pictures else {
      return try await body(AsyncBatches(DemoPictureFiles(demo: self.demo, pool: nil), size: 1_000))
    }
    defer { if !self.keepsPictures { try? FileManager.default.removeItem(atPath: scratch) } }
    try DemoPictures.writePool(to: scratch)
    return try await body(
      AsyncBatches(DemoPictureFiles(demo: self.demo, pool: scratch), size: 1_000)
    )
  }

  /// The demo employees' pictures in the pool at `pool` (none when nil), in constant memory.
  public struct DemoPictureFiles: Sequence, Sendable {
    let demo: DemoData
    let pool: String?

    public func makeIterator() -> Iterator {
      Iterator(base: self.demo.makeIterator(), pool: self.pool)
    }

    public struct Iterator: IteratorProtocol {
      var base: DemoData.Iterator
      let pool: String?

      public mutating func next() -> PictureFile? {
        guard let pool = self.pool else { return nil }
        while let record = self.base.next() {
          if let name = record.picture {
            return PictureFile(guid: record.employee.guid, path: pool + "/" + name)
          }
        }
        return nil
      }
    }
  }

  public func sales() -> AsyncBatches<DemoSales>? {
    self.salesPerEmployee > 0
      ? DemoSales(employees: self.demo, perEmployee: self.salesPerEmployee).batches() : nil
  }

  /// The demo employees as upsert rows, in constant memory.
  public struct DemoRows: Sequence, Sendable {
    let demo: DemoData

    public func makeIterator() -> Iterator {
      Iterator(base: self.demo.makeIterator())
    }

    public struct Iterator: IteratorProtocol {
      var base: DemoData.Iterator

      public mutating func next() -> UpsertRow? {
        self.base.next().map {
          UpsertRow(guid: $0.employee.guid, changes: EmployeeChanges(setting: $0.employee))
        }
      }
    }
  }
}
