import GRPCCore
import GRPCInProcessTransport
import RosterDomain
import RosterProto
import RosterSQLite
import RosterSeed
import RosterStore
import SwiftProtobuf
import TestSupport
import Testing

/// The Directory write RPCs and the change feed, through a real client.
@Suite("Directory writes", .timeLimit(.minutes(10)))
struct WriteServiceTests {
  typealias Directory = Roster_V1_Directory.Client<InProcessTransport.Client>

  static func withDirectory(
    on backend: TestBackend,
    employees: Int = 0,
    _ body: (Directory, any StoreBackend) async throws -> Void
  ) async throws {
    try await withTemporaryStore(on: backend, employees: employees) { store async throws in
      try await withInProcessClient(store: store) { client async throws in
        try await body(Directory(wrapping: client), store)
      }
    }
  }

  @Test(
    "create without a guid gets one; update changes only the masked fields; delete removes",
    arguments: TestBackend.available
  )
  func createUpdateDelete(_ backend: TestBackend) async throws {
    try await Self.withDirectory(on: backend) { directory, store async throws in
      let created = try await directory.createEmployee(
        .with {
          $0.employee = .with {
            $0.name = "Zoë Writer"
            $0.department = "Design"
            $0.startDate = "2022-05-01"
            $0.email = "zoe@example.com"
          }
        }
      )
      #expect(created.guid.count == 36)
      #expect(created.active, "a new employee is active unless the request says otherwise")
      #expect(created.hasUpdateTime)
      let updated = try await directory.updateEmployee(
        .with {
          $0.employee = .with {
            $0.guid = created.guid
            $0.department = "Sales"
            $0.email = "ignored@example.com"
          }
          $0.updateMask = .with { $0.paths = ["department"] }
        }
      )
      #expect(updated.department == "Sales")
      #expect(updated.email == "zoe@example.com", "a path outside the mask is untouched")
      // No mask: the fields the message sets.
      let patched = try await directory.updateEmployee(
        .with {
          $0.employee = .with {
            $0.guid = created.guid.uppercased()
            $0.vacationDays = 0
            $0.active = false
          }
        }
      )
      #expect(patched.vacationDays == 0 && !patched.active && patched.department == "Sales")
      _ = try await directory.deleteEmployee(.with { $0.guid = created.guid })
      await expectStatus(.notFound, mentioning: created.guid) {
        _ = try await directory.getEmployee(.with { $0.guid = created.guid })
      }
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 0)
    }
  }

  @Test(
    "UpsertEmployees merges a stream by guid and reports rejects by stream index",
    arguments: TestBackend.available
  )
  func upsertStream(_ backend: TestBackend) async throws {
    try await Self.withDirectory(on: backend, employees: 3) { directory, store async throws in
      let existing = DemoData(count: 1).first { _ in true }!.employee
      let newGUID = "7b1c3e9a-1111-4222-8333-444455556666"
      let response = try await directory.upsertEmployees { writer in
        try await writer.write(
          .with {
            $0.employees = [
              .with {
                $0.guid = existing.guid
                $0.about = "Merged"
              },
              .with { $0.guid = "bad" },
            ]
          }
        )
        try await writer.write(
          .with {
            $0.employees = [
              .with {
                $0.guid = newGUID
                $0.name = "Nova Stream"
                $0.department = "Sales"
                $0.startDate = "2023-01-02"
              },
              .with {
                $0.guid = "8b1c3e9a-1111-4222-8333-444455556666"
                $0.name = "No Department"
              },
            ]
          }
        )
      }
      #expect(response.inserted == 1)
      #expect(response.updated == 1)
      #expect(response.rejected.map(\.index) == [1, 3])
      #expect(response.rejected[1].reason.contains("department"))
      let merged = try await store.employee(guid: existing.guid, fields: .all)
      #expect(merged.about == "Merged" && merged.name == existing.name)
      #expect(try await store.employee(guid: newGUID, fields: .name).name == "Nova Stream")
    }
  }

  @Test(
    "batch writes need a filter or all, and report what they did",
    arguments: TestBackend.available
  )
  func batchWrites(_ backend: TestBackend) async throws {
    try await Self.withDirectory(on: backend, employees: 300) { directory, store async throws in
      let unknown = try await directory.batchUpdateEmployees(
        .with {
          $0.department = "Nowhere"
          $0.setActive = false
        }
      )
      #expect(unknown.affected == 0, "an unknown department matches nothing; not an error")
      let all = try await directory.batchUpdateEmployees(
        .with {
          $0.all = true
          $0.setVacationDays = 42
        }
      )
      #expect(all.affected > 0)
      #expect(try await store.countEmployees(filter: EmployeeFilter()) == 300)
      let deleted = try await directory.deleteEmployees(
        .with {
          $0.department = "Sales"
          $0.limit = 5
        }
      )
      #expect(deleted.deleted == 5 && deleted.more)
    }
  }

  @Test(
    "WatchChanges replays exactly the changes after a token, in order, then live ones",
    arguments: TestBackend.available
  )
  func watchResume(_ backend: TestBackend) async throws {
    try await Self.withDirectory(on: backend) { directory, store async throws in
      var guids: [String] = []
      for index in 0 ..< 5 {
        let created = try await directory.createEmployee(
          .with {
            $0.employee = .with {
              $0.name = "Watcher \(index)"
              $0.department = "Design"
              $0.startDate = "2020-02-02"
            }
          },
          metadata: ["x-roster-author": "alice"]
        )
        guids.append(created.guid)
      }
      let firstGUID = guids[0]
      // The token of the second change, from a replay of the whole log.
      let second = try await directory.watchChanges(.with { $0.afterToken = "0" }) { response in
        var tokens: [String] = []
        for try await event in response.messages {
          tokens.append(event.token)
          if tokens.count == 2 { break }
        }
        return tokens[1]
      }
      let events = try await directory.watchChanges(.with { $0.afterToken = second }) { response in
        var events: [Roster_V1_ChangeEvent] = []
        for try await event in response.messages {
          events.append(event)
          if events.count == 3 {
            _ = try await directory.updateEmployee(
              .with {
                $0.employee = .with {
                  $0.guid = firstGUID
                  $0.vacationDays = 9
                }
              },
              metadata: ["x-roster-author": "bob"]
            )
          }
          if events.count == 4 { break }
        }
        return events
      }
      #expect(events.map(\.guid) == Array(guids[2...]) + [guids[0]])
      #expect(events.map(\.kind) == [.inserted, .inserted, .inserted, .updated])
      #expect(events.map(\.author) == ["alice", "alice", "alice", "bob"])
      #expect(events.last?.fields == ["vacation_days"])
      #expect(events.allSatisfy { $0.entity == .employee && $0.hasUpdateTime })
      let tokens = events.compactMap { Int64($0.token) }
      #expect(tokens == Array((Int64(second)! + 1) ... (Int64(second)! + 4)))
      #expect(store.latestChange == tokens.last)
    }
  }

  @Test("a token behind the retention window is OUT_OF_RANGE and says to resync")
  func watchRetention() async throws {
    // Pruning on demand is SQLite's (PostgreSQL prunes in its maintenance, by configuration).
    try await Self.withDirectory(on: .sqlite, employees: 40) { directory, store async throws in
      try await #require(store as? SQLiteStore).pruneChangeLog(
        retention: ChangeLogRetention(maximumAge: .seconds(3600), maximumRows: 10)
      )
      await expectStatus(.outOfRange, mentioning: "resync") {
        try await directory.watchChanges(.with { $0.afterToken = "5" }) { response in
          for try await _ in response.messages {}
        }
      }
      let replayed = try await directory.watchChanges(.with { $0.afterToken = "30" }) { response in
        var count = 0
        for try await _ in response.messages {
          count += 1
          if count == 10 { break }
        }
        return count
      }
      #expect(replayed == 10)
    }
  }

  @Test(
    "a quiet watch with heartbeat_interval gets heartbeats at its position; a change still comes"
  )
  func watchHeartbeats() async throws {
    try await Self.withDirectory(on: .sqlite, employees: 3) { directory, store async throws in
      let position = String(store.latestChange)
      let events = try await directory.watchChanges(
        .with { $0.heartbeatInterval = .init(seconds: 1) }
      ) { response in
        var events: [Roster_V1_ChangeEvent] = []
        for try await event in response.messages {
          events.append(event)
          if events.count == 1 {
            _ = try await directory.createEmployee(
              .with {
                $0.employee = .with {
                  $0.name = "After A Heartbeat"
                  $0.department = "Design"
                  $0.startDate = "2020-02-02"
                }
              }
            )
          }
          if !event.heartbeat { break }
        }
        return events
      }
      #expect(events.first?.heartbeat == true)
      #expect(events.first?.token == position)
      #expect(events.first?.guid == "")
      #expect(events.last?.heartbeat == false)
      #expect(events.last?.kind == .inserted)
      await expectStatus(.invalidArgument, mentioning: "heartbeat_interval") {
        try await directory.watchChanges(
          .with { $0.heartbeatInterval = .init(seconds: 0, nanos: 500_000_000) }
        ) {
          response in
          for try await _ in response.messages {}
        }
      }
    }
  }
}
