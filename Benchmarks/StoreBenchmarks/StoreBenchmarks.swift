import Benchmark
import Foundation
import RosterDomain
import RosterPictures
import RosterSQLite
import RosterSeed
import Synchronization

/// The store's hot paths, timed with their allocations: a point read, a page of 50 with and
/// without thumbnails, the headcounts, and a coalesced write batch.
///
/// Run: `cd Benchmarks && swift package benchmark`. Keep a baseline with
/// `swift package benchmark baseline update main` and compare a change against it with
/// `swift package benchmark baseline compare main`.
let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .mallocCountTotal, .throughput],
    warmupIterations: 20,
    maxDuration: .seconds(3),
    maxIterations: 1_000_000
  )
  Benchmark.setup = { try await Fixture.shared.setUp() }
  Benchmark.teardown = { Fixture.shared.tearDown() }

  Benchmark("Point read, every field but the thumbnail") { benchmark in
    let (store, guids) = Fixture.shared.loaded
    for index in benchmark.scaledIterations {
      blackHole(
        try await store.employee(guid: guids[index % guids.count], fields: .allButThumbnail)
      )
    }
  }

  Benchmark("Page of 50 by name, without thumbnails") { benchmark in
    let (store, _) = Fixture.shared.loaded
    for _ in benchmark.scaledIterations {
      blackHole(try await Fixture.firstPage(store, fields: .allButThumbnail))
    }
  }

  Benchmark("Page of 50 by name, with thumbnails") { benchmark in
    let (store, _) = Fixture.shared.loaded
    for _ in benchmark.scaledIterations {
      blackHole(try await Fixture.firstPage(store, fields: .all))
    }
  }

  Benchmark("Department headcounts") { benchmark in
    let (store, _) = Fixture.shared.loaded
    for _ in benchmark.scaledIterations {
      blackHole(try await store.departmentCounts())
    }
  }

  // The same 64 concurrent updates with the writer coalescing (one commit for the batch) and
  // without (one commit per write), both under synchronous=FULL: group commit, measured.
  for coalesced in [true, false] {
    Benchmark(
      "64 concurrent updates, synchronous=FULL, "
        + (coalesced ? "coalesced" : "one commit per write"),
      configuration: .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        warmupIterations: 5,
        maxDuration: .seconds(5),
        maxIterations: 10_000
      )
    ) { benchmark in
      let (store, guids) = coalesced ? Fixture.shared.loaded : Fixture.shared.uncoalesced
      for iteration in benchmark.scaledIterations {
        try await withThrowingTaskGroup(of: Void.self) { group in
          for writer in 0 ..< 64 {
            group.addTask {
              var changes = EmployeeChanges()
              changes.vacationDays = (iteration + writer) % 31
              _ = try await store.updateEmployee(guid: guids[writer], changes: changes)
            }
          }
          try await group.waitForAll()
        }
      }
    }
  }
}

/// A store on a temporary WAL database with 10,000 demo employees; the first 50 by name have
/// a picture, so their page carries thumbnails. A second store, with the same employees and
/// a writer that commits every write alone, is the group-commit baseline.
final class Fixture: Sendable {
  static let shared = Fixture()
  static let employees = 10_000

  private struct Loaded {
    var store: SQLiteStore
    var uncoalesced: SQLiteStore
    var guids: [String]
    var directory: String
  }

  private let state = Mutex<Loaded?>(nil)

  /// The store and a shuffled list of its guids.
  var loaded: (store: SQLiteStore, guids: [String]) {
    self.state.withLock { ($0!.store, $0!.guids) }
  }

  /// The baseline store, whose writer commits every write alone, and its guids.
  var uncoalesced: (store: SQLiteStore, guids: [String]) {
    self.state.withLock { ($0!.uncoalesced, $0!.guids) }
  }

  static func firstPage(_ store: SQLiteStore, fields: EmployeeFields) async throws -> EmployeePage {
    try await store.employeePage(
      fields: fields,
      filter: EmployeeFilter(),
      order: .name,
      after: nil,
      limit: 50
    )
  }

  func setUp() async throws {
    guard self.state.withLock({ $0 == nil }) else { return }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("roster-bench-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let store = try SQLiteStore(
      configuration: StoreConfiguration(path: directory + "/bench.sqlite")
    )
    let demo = Array(DemoData(count: Self.employees))
    _ = try await store.importEmployees(demo.map(\.employee))
    let picture = directory + "/picture.jpg"
    try Data(DemoPictures.jpeg(width: 800, height: 800, seed: 7)).write(
      to: URL(fileURLWithPath: picture)
    )
    for employee in try await Self.firstPage(store, fields: .guid).employees {
      try await store.putPicture(guid: employee.guid, file: picture)
    }
    var baseline = StoreConfiguration(path: directory + "/uncoalesced.sqlite")
    baseline.writer.maximumBatch = 1
    let uncoalesced = try SQLiteStore(configuration: baseline)
    _ = try await uncoalesced.importEmployees(demo.map(\.employee))
    var random = SystemRandomNumberGenerator()
    let guids = demo.map(\.employee.guid).shuffled(using: &random)
    self.state.withLock {
      $0 = Loaded(store: store, uncoalesced: uncoalesced, guids: guids, directory: directory)
    }
  }

  func tearDown() {
    let directory = self.state.withLock { state -> String? in
      defer { state = nil }
      return state?.directory
    }
    if let directory { try? FileManager.default.removeItem(atPath: directory) }
  }
}
