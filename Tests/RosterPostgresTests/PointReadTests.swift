import Foundation
import RosterDomain
import TestSupport
import Testing

@testable import RosterPostgres

/// `PointReads`: concurrent `GetEmployee` reads share statements, and each still gets its own
/// answer, found or not, cancelled or not.
@Suite("PostgreSQL point reads", .timeLimit(.minutes(10)), .enabled(if: PostgresTesting.enabled))
struct PointReadTests {
  @Test(
    "300 concurrent reads of 200 employees and 100 unknown guids: each its own answer, from fewer statements"
  )
  func coalesced() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      try await Self.insertEmployees(200, configuration)
      let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
        for index in 1 ... 300 {
          group.addTask {
            do {
              let employee = try await store.employee(guid: "guid-\(index)", fields: .all)
              return (index, "\(employee.guid) \(employee.name) \(employee.vacationDays)")
            } catch let error as StoreError where error.code == .notFound {
              return (index, nil)
            }
          }
        }
        var answers: [Int: String?] = [:]
        for try await (index, answer) in group { answers[index] = answer }
        return answers
      }
      for index in 1 ... 300 {
        let expected = index <= 200 ? "guid-\(index) Name \(index) \(index % 30)" : nil
        #expect(answers[index] == expected, "read \(index)")
      }
      let statements = store.pointReads.statements.load(ordering: .relaxed)
      #expect(statements < 300, "every read ran its own statement: \(statements)")
    }
  }

  @Test("a waiting read whose task is cancelled answers at once; the others still get theirs")
  func cancelledWhileWaiting() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      try await Self.insertEmployees(50, configuration)
      // Many reads, half of them cancelled as soon as they start: every one either answers
      // with its employee or is cancelled, and none waits for good (the suite's time limit).
      let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
        var tasks: [Task<String, any Error>] = []
        for index in 1 ... 200 {
          let task = Task {
            do {
              let employee = try await store.employee(guid: "guid-\(1 + index % 50)", fields: .all)
              return employee.guid == "guid-\(1 + index % 50)" ? "ok" : "wrong \(employee.guid)"
            } catch let error as StoreError where error.code == .cancelled {
              return "cancelled"
            }
          }
          tasks.append(task)
          if index % 2 == 0 { task.cancel() }
        }
        for task in tasks { group.addTask { try await task.value } }
        var outcomes: [String] = []
        for try await outcome in group { outcomes.append(outcome) }
        return outcomes
      }
      #expect(outcomes.count == 200)
      #expect(
        outcomes.allSatisfy { $0 == "ok" || $0 == "cancelled" },
        "\(outcomes.filter { $0 != "ok" && $0 != "cancelled" })"
      )
      #expect(outcomes.filter { $0 == "ok" }.count >= 100, "the reads not cancelled answered")
    }
  }

  /// Employees `guid-1` to `guid-COUNT`, named `Name N`, with `N % 30` vacation days.
  static func insertEmployees(_ count: Int, _ configuration: PostgresConfiguration) async throws {
    _ = try await PostgresTesting.query(
      configuration,
      """
      INSERT INTO employees (guid, name, name_folded, department, active, start_date, vacation_days, update_time)
      SELECT 'guid-' || i, 'Name ' || i, 'name ' || i, 'Dept ' || (i % 7), true, '2020-01-01', i % 30, 0
      FROM generate_series(1, \(count)) AS i
      """
    )
  }
}
