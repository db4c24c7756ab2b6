import Foundation
import Logging
import RosterDomain
import RosterSQLite
import RosterSeed
import ServiceLifecycle
import TestSupport
import Testing

@Suite("One import path, and the store as a service", .timeLimit(.minutes(10)))
struct LoadAndLifecycleTests {
  @Test(
    "seeding and roster import take one path: the demo directory loads the same from the generators and from its files"
  )
  func seedAndImportAgree() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let demo = DemoData(count: 120, pictures: true)
    let pool = directory + "/pictures"
    let loader = DirectoryLoader(context: WriteContext(author: "test"))

    // A pool kept between loads (`roster serve --demo-pictures`) stays, whole.
    let seeded = try SQLiteStore(
      configuration: StoreConfiguration(path: directory + "/seeded.sqlite")
    )
    let fromDemo = try await loader.load(
      DemoSource(demo: demo, pictureScratch: pool, keepsPictures: true, salesPerEmployee: 3),
      into: seeded
    )
    let kept = try FileManager.default.contentsOfDirectory(atPath: pool).filter {
      $0.hasSuffix(".jpg")
    }
    #expect(kept.count == DemoPictures.pool.count, "the kept pool: \(kept)")

    // A scratch pool goes after the load; what is already there is not made again.
    let scratch = directory + "/scratch"
    try FileManager.default.copyItem(atPath: pool, toPath: scratch)
    let scratchStore = try SQLiteStore(
      configuration: StoreConfiguration(path: directory + "/scratch.sqlite")
    )
    let fromScratch = try await loader.load(
      DemoSource(demo: demo, pictureScratch: scratch, salesPerEmployee: 0),
      into: scratchStore
    )
    #expect(fromScratch.picturesStored == fromDemo.picturesStored)
    #expect(
      !FileManager.default.fileExists(atPath: scratch),
      "the picture pool's scratch directory goes after the load"
    )

    // The same directory as `roster seed` writes it (the kept pool is that pool, so nothing
    // is made again), loaded as `roster import` does.
    try SeedFile.write(demo, to: directory + "/seed.json")
    #expect(try DemoPictures.writePool(to: pool) == 0)
    try SalesFile.write(DemoSales(employees: demo, perEmployee: 3), to: directory + "/sales.csv")
    let imported = try SQLiteStore(
      configuration: StoreConfiguration(path: directory + "/imported.sqlite")
    )
    let fromFiles = try await loader.load(
      SeedFileSource(file: directory + "/seed.json"),
      into: imported
    )

    #expect(fromDemo.employees.imported == 120 && fromFiles.employees.imported == 120)
    #expect(fromDemo.picturesStored > 0 && fromDemo.picturesRefused.isEmpty)
    #expect(fromDemo.picturesStored == fromFiles.picturesStored)
    #expect(
      (fromDemo.sales?.inserted ?? 0) > 0 && fromDemo.sales?.inserted == fromFiles.sales?.inserted
    )

    let all = try await seeded.employeePage(
      fields: .all,
      filter: EmployeeFilter(),
      order: .name,
      after: nil,
      limit: 1_000
    )
    let again = try await imported.employeePage(
      fields: .all,
      filter: EmployeeFilter(),
      order: .name,
      after: nil,
      limit: 1_000
    )
    #expect(all.employees.count == 120)
    #expect(all.employees.map(\.guid) == again.employees.map(\.guid))
    #expect(all.employees.map(\.name) == again.employees.map(\.name))
    #expect(
      all.employees.map { $0.thumbnail?.hashValue }
        == again.employees.map { $0.thumbnail?.hashValue }
    )
    for employee in all.employees.prefix(10) {
      let (count, cents) = try await seeded.employeeSales(guid: employee.guid)
      let (countAgain, centsAgain) = try await imported.employeeSales(guid: employee.guid)
      #expect(count == countAgain && cents == centsAgain)
    }
    let counts = try await seeded.departmentCounts()
    #expect(try await imported.departmentCounts() == counts)
  }

  @Test(
    "the store as a service sweeps stray uploads at start and empties the WAL at graceful shutdown"
  )
  func serviceLifecycle() async throws {
    try await withTemporaryStore(configure: { $0.checkpointInterval = .seconds(3_600) }) {
      store async throws in
      let path = store.configuration.path
      let stray = store.configuration.picturesDirectory + "/tmp/upload-left-by-a-crash"
      FileManager.default.createFile(atPath: stray, contents: Data([1, 2, 3]))
      _ = try await store.importEmployees((0 ..< 50).map { makeEmployee(name: "Wal Writer \($0)") })
      #expect(Self.size(path + "-wal") > 0, "the writes sit in the WAL")

      let group = ServiceGroup(services: [store], logger: Logger(label: "test"))
      try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var waited = 0
        while FileManager.default.fileExists(atPath: stray) && waited < 200 {
          try await Task.sleep(for: .milliseconds(10))
          waited += 1
        }
        #expect(
          !FileManager.default.fileExists(atPath: stray),
          "the start-up sweep removes the stray upload"
        )
        #expect(Self.size(path + "-wal") > 0, "no background checkpoint ran in between")
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
      }
      #expect(Self.size(path + "-wal") == 0, "graceful shutdown ends with a TRUNCATE checkpoint")
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 50)
    }
  }

  static func size(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
  }
}
