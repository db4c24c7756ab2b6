import Foundation
import RosterDomain
@testable import RosterPostgres
import Testing
import TestSupport

/// The writer runs the prepared updates of a batch that are next to each other, each of a
/// different employee, as one statement (`EmployeeUpdates`): each update still gets its own
/// answer, found or not, and its own change in the log, and two updates of one employee both
/// land.
@Suite("PostgreSQL updates written together", .timeLimit(.minutes(5)), .enabled(if: PostgresTesting.enabled))
struct JointUpdateTests {
  @Test("300 concurrent updates: two of different fields for each of 100 employees, two for each of 50 unknown guids")
  func concurrentUpdates() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      try await PointReadTests.insertEmployees(100, configuration)
      let before = try await store.changes(after: 0, limit: 1_000).last?.sequence ?? 0
      // Each employee gets two updates of different fields (its e-mail, then its vacation days
      // and active flag), sent at once: both must land whatever the order and the batches.
      let answers = try await withThrowingTaskGroup(of: (String, String).self) { group in
        for index in 1...150 {
          for part in 0..<2 {
            group.addTask {
              let guid = "guid-\(index)"
              var changes = EmployeeChanges()
              if part == 0 {
                changes.email = "e\(index)@example.com"
              } else {
                changes.vacationDays = index % 20
                changes.active = index % 2 == 0
              }
              do {
                let employee = try await store.updateEmployee(guid: guid, changes: changes, context: WriteContext(author: "test"))
                return ("\(guid)/\(part)", "\(employee.guid) \(employee.name) \(part == 0 ? employee.email : "\(employee.vacationDays) \(employee.active)")")
              } catch let error as StoreError where error.code == .notFound {
                return ("\(guid)/\(part)", "not found")
              }
            }
          }
        }
        var answers: [String: String] = [:]
        for try await (key, answer) in group { answers[key] = answer }
        return answers
      }
      for index in 1...150 {
        let guid = "guid-\(index)"
        if index <= 100 {
          #expect(answers["\(guid)/0"] == "\(guid) Name \(index) e\(index)@example.com")
          #expect(answers["\(guid)/1"] == "\(guid) Name \(index) \(index % 20) \(index % 2 == 0)")
          let stored = try await store.employee(guid: guid, fields: .all)
          #expect(stored.email == "e\(index)@example.com" && stored.vacationDays == index % 20 && stored.active == (index % 2 == 0), "\(guid)")
        } else {
          #expect(answers["\(guid)/0"] == "not found" && answers["\(guid)/1"] == "not found", "\(guid)")
        }
      }
      // One change per update that found its employee, naming what it changed.
      let changes = try await store.changes(after: before, limit: 1_000)
      #expect(changes.count == 200)
      for index in 1...100 {
        let mine = changes.filter { $0.guid == "guid-\(index)" }
        #expect(mine.count == 2 && mine.contains { $0.fields == ["email"] }, "guid-\(index): \(mine.map(\.fields))")
      }
      let joint = store.writes.jointUpdates.load(ordering: .relaxed)
      #expect(joint > 0, "no batch wrote its updates together")
    }
  }

  @Test("an update PostgreSQL refuses fails alone; the updates written beside it land")
  func oneRefused() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      try await PointReadTests.insertEmployees(60, configuration)
      // Past the service's validation, straight to the writer: a negative number of vacation
      // days, which the table's CHECK refuses, in the middle of many good updates.
      let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
        for index in 1...60 {
          group.addTask {
            let changes = {
              var changes = EmployeeChanges()
              changes.vacationDays = index == 30 ? -1 : 100 + index
              return changes
            }()
            let update = try #require(EmployeeUpdate(guid: "guid-\(index)", changes: changes))
            do {
              _ = try await store.writes.submitUpdate(update) { transaction, row, now in
                try PostgresStore.updated(row, guid: "guid-\(index)", changes: changes, now: now, context: WriteContext(author: "test"), in: transaction)
              }
              return (index, true)
            } catch {
              return (index, false)
            }
          }
        }
        var outcomes: [Int: Bool] = [:]
        for try await (index, ok) in group { outcomes[index] = ok }
        return outcomes
      }
      for index in 1...60 {
        let stored = try await store.employee(guid: "guid-\(index)", fields: .all)
        if index == 30 {
          #expect(outcomes[index] == false)
          #expect(stored.vacationDays == 0, "the refused update changed its row")
        } else {
          #expect(outcomes[index] == true, "update \(index)")
          #expect(stored.vacationDays == 100 + index, "update \(index)")
        }
      }
    }
  }
}
