import Foundation
import RosterDomain
import TestSupport
import Testing

@testable import RosterPostgres

/// The writer runs the prepared updates and the creates of a batch that are next to each other,
/// each of a different employee, as one statement of each kind (`EmployeeUpdates`,
/// `EmployeeInserts`): each write still gets its own answer, found or not, taken or not, and
/// its own change in the log, and two updates of one employee both land.
@Suite(
  "PostgreSQL updates and creates written together",
  .timeLimit(.minutes(10)),
  .enabled(if: PostgresTesting.enabled)
)
struct JointUpdateTests {
  @Test(
    "300 concurrent updates: two of different fields for each of 100 employees, two for each of 50 unknown guids"
  )
  func concurrentUpdates() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      try await PointReadTests.insertEmployees(100, configuration)
      let before = try await store.changes(after: 0, limit: 1_000).last?.sequence ?? 0
      // Each employee gets two updates of different fields (its e-mail, then its vacation days
      // and active flag), sent at once: both must land whatever the order and the batches.
      let answers = try await withThrowingTaskGroup(of: (String, String).self) { group in
        for index in 1 ... 150 {
          for part in 0 ..< 2 {
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
                let employee = try await store.updateEmployee(
                  guid: guid,
                  changes: changes,
                  context: WriteContext(author: "test")
                )
                return (
                  "\(guid)/\(part)",
                  "\(employee.guid) \(employee.name) \(part == 0 ? employee.email : "\(employee.vacationDays) \(employee.active)")"
                )
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
      for index in 1 ... 150 {
        let guid = "guid-\(index)"
        if index <= 100 {
          #expect(answers["\(guid)/0"] == "\(guid) Name \(index) e\(index)@example.com")
          #expect(answers["\(guid)/1"] == "\(guid) Name \(index) \(index % 20) \(index % 2 == 0)")
          let stored = try await store.employee(guid: guid, fields: .all)
          #expect(
            stored.email == "e\(index)@example.com" && stored.vacationDays == index % 20
              && stored.active == (index % 2 == 0),
            "\(guid)"
          )
        } else {
          #expect(
            answers["\(guid)/0"] == "not found" && answers["\(guid)/1"] == "not found",
            "\(guid)"
          )
        }
      }
      // One change per update that found its employee, naming what it changed.
      let changes = try await store.changes(after: before, limit: 1_000)
      #expect(changes.count == 200)
      for index in 1 ... 100 {
        let mine = changes.filter { $0.guid == "guid-\(index)" }
        #expect(
          mine.count == 2 && mine.contains { $0.fields == ["email"] },
          "guid-\(index): \(mine.map(\.fields))"
        )
      }
      let joint = store.writes.jointWrites.load(ordering: .relaxed)
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
      let outcomes = await Self.outcomes(1 ... 60) { index in
        try await Self.updateVacation(
          store,
          guid: "guid-\(index)",
          to: index == 30 ? -1 : 100 + index
        )
      }
      for index in 1 ... 60 {
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

  @Test("110 concurrent creates, 10 of guids already taken: each its own answer, row and change")
  func concurrentCreates() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      let context = WriteContext(author: "test")
      let taken = (0 ..< 10).map { _ in UUID().uuidString.lowercased() }
      for guid in taken {
        _ = try await store.createEmployee(
          makeEmployee(name: "First", guid: guid),
          context: context
        )
      }
      let before = try await store.changes(after: 0, limit: 1_000).last?.sequence ?? 0
      let jointBefore = store.writes.jointWrites.load(ordering: .relaxed)
      let fresh = (0 ..< 100).map { _ in UUID().uuidString.lowercased() }
      let answers = try await withThrowingTaskGroup(of: (String, String).self) { group in
        for (index, guid) in (fresh + taken).enumerated() {
          group.addTask {
            let employee = makeEmployee(
              name: "New \(index)",
              department: "Dept \(index % 3)",
              guid: guid
            )
            do {
              let created = try await store.createEmployee(employee, context: context)
              return (guid, "created \(created.id > 0) \(created.name)")
            } catch let error as StoreError where error.code == .alreadyExists {
              return (guid, "taken")
            }
          }
        }
        var answers: [String: String] = [:]
        for try await (guid, answer) in group { answers[guid] = answer }
        return answers
      }
      var ids: Set<Int64> = []
      for (index, guid) in fresh.enumerated() {
        #expect(answers[guid] == "created true New \(index)", "\(guid)")
        let stored = try await store.employee(guid: guid, fields: .all)
        #expect(
          stored.name == "New \(index)" && stored.department == "Dept \(index % 3)",
          "\(guid)"
        )
        ids.insert(stored.id)
      }
      #expect(ids.count == fresh.count, "two creates got one id")
      for guid in taken {
        #expect(answers[guid] == "taken", "\(guid)")
        #expect(
          try await store.employee(guid: guid, fields: .all).name == "First",
          "a refused create changed \(guid)"
        )
      }
      // One change per employee created; none for the guids already taken.
      let changes = try await store.changes(after: before, limit: 1_000)
      #expect(changes.count == fresh.count)
      #expect(Set(changes.map(\.guid)) == Set(fresh) && changes.allSatisfy { $0.kind == .inserted })
      let joint = store.writes.jointWrites.load(ordering: .relaxed) - jointBefore
      #expect(joint > 0, "no batch wrote its creates together")
    }
  }

  @Test("a create PostgreSQL refuses fails alone; the creates and updates written beside it land")
  func oneCreateRefused() async throws {
    let configuration = try PostgresTesting.configuration()
    try await PostgresTesting.withStore(configuration) { store in
      try await PointReadTests.insertEmployees(30, configuration)
      // Past the service's validation, straight to the writer: a negative number of vacation
      // days, which the table's CHECK refuses, among good creates and updates.
      let outcomes = await Self.outcomes(1 ... 60) { index in
        if index % 2 == 0 {
          try await Self.updateVacation(store, guid: "guid-\(index / 2)", to: 100 + index)
          return
        }
        let employee = {
          var employee = makeEmployee(name: "New \(index)", guid: "new-\(index)")
          employee.vacationDays = index == 31 ? -1 : index
          return employee
        }()
        try await store.writes.submitInsert(employee) { transaction, id, now in
          guard id != nil else { throw StoreError(.alreadyExists, "taken") }
          transaction.record(
            .employee,
            guid: employee.guid,
            kind: .inserted,
            context: WriteContext(author: "test"),
            timeMillis: now
          )
        }
      }
      for index in 1 ... 60 {
        if index == 31 {
          #expect(outcomes[index] == false)
          await #expect(throws: StoreError.self, "the refused create wrote its row") {
            try await store.employee(guid: "new-31", fields: .all)
          }
        } else if index % 2 == 0 {
          #expect(outcomes[index] == true, "update \(index)")
          #expect(
            try await store.employee(guid: "guid-\(index / 2)", fields: .all).vacationDays == 100
              + index
          )
        } else {
          #expect(outcomes[index] == true, "create \(index)")
          #expect(
            try await store.employee(guid: "new-\(index)", fields: .all).vacationDays == index
          )
        }
      }
    }
  }

  /// Runs `write` for each of `indices` at once; which of them succeeded.
  static func outcomes(
    _ indices: ClosedRange<Int>,
    _ write: @escaping @Sendable (Int) async throws -> Void
  ) async -> [Int: Bool] {
    await withTaskGroup(of: (Int, Bool).self) { group in
      for index in indices {
        group.addTask { ((try? await write(index)) != nil) ? (index, true) : (index, false) }
      }
      var outcomes: [Int: Bool] = [:]
      for await (index, ok) in group { outcomes[index] = ok }
      return outcomes
    }
  }

  /// Sets `guid`'s vacation days straight through the writer (`submitUpdate`), past the
  /// service's validation: a negative number reaches the table's CHECK.
  static func updateVacation(_ store: PostgresStore, guid: String, to days: Int) async throws {
    var changes = EmployeeChanges()
    changes.vacationDays = days
    let update = try #require(EmployeeUpdate(guid: guid, changes: changes))
    _ = try await store.writes.submitUpdate(update) { [changes] transaction, row, now in
      try PostgresStore.updated(
        row,
        guid: guid,
        changes: changes,
        now: now,
        context: WriteContext(author: "test"),
        in: transaction
      )
    }
  }

}
