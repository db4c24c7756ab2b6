import Foundation
import PostgresNIO
import RosterDomain
import Synchronization
import TestSupport
import Testing

@testable import RosterPostgres

/// What only several replicas over one database can show: one migration however many start
/// together, a change log in commit order across replicas, watchers woken by another
/// replica's commit, and group commit.
@Suite(
  "PostgreSQL replicas",
  .timeLimit(.minutes(15)),
  .enabled(if: PostgresTesting.enabled),
  .serialized
)
struct ReplicaTests {
  @Test("replicas that start together migrate the schema once, and exactly one of them created it")
  func migrateOnce() async throws {
    let configuration = try PostgresTesting.configuration()
    let stores: [PostgresStore]
    do {
      stores = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
        for _ in 0 ..< 4 {
          group.addTask {
            try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
          }
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
    } catch {
      throw TestFailure(String(reflecting: error))
    }
    #expect(stores.count(where: \.createdSchema) == 1)
    let rows = try await PostgresTesting.query(
      configuration,
      "SELECT count(*), count(DISTINCT version) FROM schema_migrations"
    )
    let (count, distinct) = try rows[0].decode((Int64, Int64).self)
    #expect(count == distinct && count >= 2)
    try await PostgresTesting.dropSchema(configuration)
  }

  @Test(
    "the change log is numbered in commit order across two replicas: a reader tailing it during concurrent writes misses nothing"
  )
  func commitOrderAcrossReplicas() async throws {
    let configuration = try PostgresTesting.configuration()
    let a = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    let b = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    let (acknowledged, tailed, all) = try await PostgresTesting.running(a) { a in
      try await PostgresTesting.running(b) { b in
        let stop = StopFlag()
        let writersDone = StopFlag()
        // A reader on replica B follows the log as a watcher does: strictly after the last
        // token it saw. A change numbered before one already seen but committed after it
        // would be skipped for good. It drains the log once every writer has finished.
        let reader = Task {
          var seen: [Change] = []
          var last: Int64 = 0
          var draining = false
          while true {
            try Task.checkCancellation()
            let page = try await b.changes(after: last, limit: 500)
            seen += page
            last = page.last?.sequence ?? last
            if draining && page.isEmpty { return seen }
            draining = writersDone.value.load(ordering: .relaxed)
          }
        }
        defer { reader.cancel() }
        let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
          // Six writers, three per replica, each creating employees one by one.
          for writer in 0 ..< 6 {
            let store = writer % 2 == 0 ? a : b
            group.addTask {
              var made: [String] = []
              while !stop.value.load(ordering: .relaxed) {
                var employee = Employee()
                employee.guid = UUID().uuidString.lowercased()
                employee.name = "Writer \(writer) \(made.count)"
                employee.department = ["Sales", "Design"][made.count % 2]
                employee.startDate = "2020-01-01"
                employee.active = true
                made.append(
                  try await store.createEmployee(
                    employee,
                    context: WriteContext(author: "w\(writer)")
                  ).guid
                )
              }
              return made
            }
          }
          try await Task.sleep(for: .seconds(3))
          stop.value.store(true, ordering: .relaxed)
          return try await group.reduce(into: []) { $0 += $1 }
        }
        writersDone.value.store(true, ordering: .relaxed)
        let tailed = try await reader.value
        do {
          var all: [Change] = []
          var last: Int64 = 0
          while true {
            let page = try await a.changes(after: last, limit: 1000)
            if page.isEmpty { break }
            all += page
            last = page.last!.sequence
          }
          return (acknowledged, tailed, all)
        }
      }
    }
    try await PostgresTesting.dropSchema(configuration)
    #expect(acknowledged.count > 50, "writes made: \(acknowledged.count)")
    #expect(all.map(\.sequence) == Array(1 ... Int64(all.count)), "no gaps, in order")
    #expect(
      Set(all.map(\.guid)) == Set(acknowledged),
      "every acknowledged write is logged, and nothing else"
    )
    #expect(
      tailed.map(\.sequence) == all.map(\.sequence),
      "the tailing reader saw \(tailed.count) of \(all.count)"
    )
  }

  @Test(
    "a watcher on replica B wakes within 100 ms of a commit through replica A (LISTEN/NOTIFY, no polling)"
  )
  func watcherWakesAcrossReplicas() async throws {
    var configuration = try PostgresTesting.configuration()
    configuration.feedPollInterval = .seconds(600)
    let a = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    let b = try await PostgresStore.open(configuration, logger: PostgresTesting.logger)
    let delays = try await PostgresTesting.running(a) { a in
      try await PostgresTesting.running(b) { b in
        try await Task.sleep(for: .milliseconds(300))  // B's LISTEN is in place
        var delays: [Duration] = []
        for round in 0 ..< 5 {
          let start = b.latestChange
          // Bounded: a watcher that is never woken fails the test instead of hanging it.
          async let woke: ContinuousClock.Instant = withThrowingTaskGroup(
            of: ContinuousClock.Instant.self
          ) { race in
            race.addTask {
              _ = try await b.waitForChanges(after: start)
              return ContinuousClock.now
            }
            race.addTask {
              try await Task.sleep(for: .seconds(5))
              throw TestFailure("replica B was not woken within 5 s")
            }
            defer { race.cancelAll() }
            return try await race.next()!
          }
          try await Task.sleep(for: .milliseconds(50))
          var employee = Employee()
          employee.guid = UUID().uuidString.lowercased()
          employee.name = "Watched \(round)"
          employee.department = "Sales"
          employee.startDate = "2021-02-03"
          _ = try await a.createEmployee(employee, context: WriteContext())
          let committed = ContinuousClock.now
          delays.append(max(.zero, try await woke - committed))
        }
        return delays
      }
    }
    try await PostgresTesting.dropSchema(configuration)
    let median = delays.sorted()[delays.count / 2]
    // The poll is 600 s here, so only the notification can have woken B. How fast is a
    // speed: printed, not bounded (100 ms or less on an idle machine).
    print("ReplicaTests: NOTIFY wake-up delays \(delays)")
    #expect(median < .seconds(5), "delays \(delays)")
  }

  @Test("concurrent writes on one replica share transactions (group commit)")
  func groupCommit() async throws {
    try await PostgresTesting.withStore { store in
      try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0 ..< 64 {
          group.addTask {
            var employee = Employee()
            employee.guid = UUID().uuidString.lowercased()
            employee.name = "Concurrent \(index)"
            employee.department = "Sales"
            employee.startDate = "2022-01-01"
            _ = try await store.createEmployee(employee, context: WriteContext())
          }
        }
        try await group.waitForAll()
      }
      // Each transaction numbers its changes in one statement, outside the writes'
      // savepoints, so its log rows share the transaction's id.
      let rows = try await PostgresTesting.query(
        store.configuration,
        "SELECT count(*), count(DISTINCT xmin::text) FROM change_log"
      )
      let (changes, transactions) = try rows[0].decode((Int64, Int64).self)
      #expect(changes == 64)
      #expect(transactions <= 32, "64 writes took \(transactions) transactions")
    }
  }

  @Test(
    "in a shared transaction, a write without a savepoint whose statement fails answers alone; the others commit"
  )
  func failedWriteWithoutSavepoint() async throws {
    try await PostgresTesting.withStore { store in
      _ = try await PostgresTesting.query(
        store.configuration,
        "CREATE TABLE writes (name text PRIMARY KEY, one int8 NOT NULL)"
      )
      let results = await withTaskGroup(of: (Int, Bool).self) { group in
        for index in 0 ..< 48 {
          group.addTask {
            do {
              try await store.submit(savepoint: false) { transaction in
                // Every eighth write fails at the server, which aborts the transaction.
                let value = index % 8 == 3 ? 0 : 1
                try await transaction.execute(
                  "INSERT INTO writes (name, one) VALUES (\("w\(index)"), 1 / \(value))"
                )
              }
              return (index, true)
            } catch {
              return (index, false)
            }
          }
        }
        return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
      }
      #expect(results.count == 48)
      #expect(results.filter { !$0.value }.keys.sorted() == (0 ..< 48).filter { $0 % 8 == 3 })
      let rows = try await PostgresTesting.query(
        store.configuration,
        "SELECT name FROM writes"
      )
      let stored = Set(try rows.map { try $0.decode(String.self) })
      #expect(
        stored == Set((0 ..< 48).filter { $0 % 8 != 3 }.map { "w\($0)" }),
        "every good write, and no failed one"
      )
    }
  }
}

/// A flag the test's tasks share.
final class StopFlag: Sendable {
  let value = Atomic(false)
}
