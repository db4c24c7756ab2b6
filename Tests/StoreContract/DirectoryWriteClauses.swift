internal import Foundation
internal import RosterDomain
internal import RosterStore

/// The directory's write clauses: updates, deletes, upserts and bulk writes.
extension StoreContract {
  static func updateChangesOnlyWhatItSets(_ store: Store) async throws {
    let made = try await store.createEmployee(Self.person("Grace Hopper"), context: Self.writer)
    var changes = EmployeeChanges()
    changes.vacationDays = 3
    changes.department = "Navy"
    let updated = try await store.updateEmployee(
      guid: made.guid,
      changes: changes,
      context: Self.writer
    )
    let read = try await store.employee(guid: made.guid, fields: .all)
    try Self.require(
      updated.vacationDays == 3 && updated.department == "Navy",
      "the update returns the stored row"
    )
    try Self.require(
      read.name == made.name && read.email == made.email && read.startDate == made.startDate,
      "fields the update left out changed: \(read)"
    )
    try Self.require(
      read.vacationDays == 3 && read.department == "Navy",
      "the update did not land: \(read)"
    )
    try await Self.requireError(
      .notFound,
      naming: "00000000-0000-4000-8000-0000000000bb",
      "an update of an unknown guid"
    ) {
      _ = try await store.updateEmployee(
        guid: "00000000-0000-4000-8000-0000000000bb",
        changes: changes,
        context: Self.writer
      )
    }
    // Neither the name nor the department (PostgreSQL's prepared `EmployeeUpdate`).
    var others = EmployeeChanges()
    others.phone = "+1 555 0100"
    others.active = false
    others.vacationDays = 0
    let again = try await store.updateEmployee(
      guid: made.guid,
      changes: others,
      context: Self.writer
    )
    let reread = try await store.employee(guid: made.guid, fields: .all)
    try Self.require(
      again.phone == "+1 555 0100" && !again.active && again.vacationDays == 0,
      "the update returns the stored row: \(again)"
    )
    try Self.require(
      reread.phone == "+1 555 0100" && !reread.active && reread.vacationDays == 0,
      "the update did not land: \(reread)"
    )
    try Self.require(
      reread.name == made.name && reread.email == made.email && reread.address == made.address
        && reread.startDate == made.startDate && reread.department == "Navy",
      "fields the update left out changed: \(reread)"
    )
    try await Self.requireError(
      .notFound,
      naming: "00000000-0000-4000-8000-0000000000bb",
      "an update of an unknown guid"
    ) {
      _ = try await store.updateEmployee(
        guid: "00000000-0000-4000-8000-0000000000bb",
        changes: others,
        context: Self.writer
      )
    }
  }

  static func deleteRemoves(_ store: Store) async throws {
    let made = try await Self.create(store, Array(Self.names.prefix(3)))
    try await store.deleteEmployee(guid: made[1].guid, context: Self.writer)
    try await Self.requireError(.notFound, naming: made[1].guid, "a read after the delete") {
      _ = try await store.employee(guid: made[1].guid, fields: .all)
    }
    try await Self.requireError(.notFound, naming: made[1].guid, "a second delete") {
      try await store.deleteEmployee(guid: made[1].guid, context: Self.writer)
    }
    try Self.require(
      try await store.countEmployees(filter: EmployeeFilter()) == 2,
      "the others stay"
    )
  }

  static func upsertMergesAndReports(_ store: Store) async throws {
    let made = try await store.createEmployee(Self.person("Alan Turing"), context: Self.writer)
    var rename = EmployeeChanges()
    rename.name = "Alan M. Turing"
    let fresh = "11111111-1111-4111-8111-111111111111"
    let rows: [[UpsertRow]] = [
      [
        UpsertRow(guid: made.guid, changes: rename),
        UpsertRow(guid: fresh, changes: EmployeeChanges(setting: Self.person("New Person"))),
      ],
      [UpsertRow(guid: "22222222-2222-4222-8222-222222222222", changes: rename)],
    ]
    let summary = try await store.upsertEmployees(
      Self.stream(rows),
      context: Self.writer,
      chunkRows: 1
    )
    try Self.require(summary.inserted == 1 && summary.updated == 1, "upsert counts: \(summary)")
    try Self.require(
      summary.rejected.map(\.index) == [2],
      "a new guid without name and dates is rejected by index: \(summary)"
    )
    let merged = try await store.employee(guid: made.guid, fields: .all)
    try Self.require(
      merged.name == "Alan M. Turing" && merged.department == made.department
        && merged.vacationDays == 10,
      "an upsert row changes only the fields it sets: \(merged)"
    )
    try Self.require(
      try await store.employee(guid: fresh, fields: [.name]).name == "New Person",
      "the new row landed"
    )
  }

  static func bulkWritesReportWhatTheyDid(_ store: Store) async throws {
    _ = try await Self.create(store, Self.names)
    let design = try await store.countEmployees(filter: EmployeeFilter(department: "Design"))
    var changes = EmployeeChanges()
    changes.vacationDays = 30
    let updated = try await store.batchUpdateEmployees(
      filter: EmployeeFilter(department: "Design"),
      changes: changes,
      context: Self.writer
    )
    try Self.require(Int64(updated) == design, "batch update changed \(updated), \(design) match")
    let again = try await store.batchUpdateEmployees(
      filter: EmployeeFilter(department: "Design"),
      changes: changes,
      context: Self.writer
    )
    try Self.require(again == 0, "rows already holding the values are skipped: \(again)")
    let first = try await store.deleteEmployees(
      filter: EmployeeFilter(department: "Design"),
      limit: 2,
      context: Self.writer
    )
    try Self.require(first.deleted == 2 && first.more == (design > 2), "a limited delete: \(first)")
    let rest = try await store.deleteEmployees(
      filter: EmployeeFilter(department: "Design"),
      limit: 1000,
      context: Self.writer
    )
    try Self.require(Int64(rest.deleted) == design - 2 && !rest.more, "the rest: \(rest)")
    try Self.require(
      try await store.countEmployees(filter: EmployeeFilter(department: "Design")) == 0,
      "none left"
    )
  }

  /// Each kind of write, under a call's control, leaves the call the change token of its
  /// commit (the feed's end once it returned: nothing else writes here); a read leaves none.
  static func writesCarryTheirChangeToken(_ store: Store) async throws {
    let made = try await Self.create(store, Array(Self.names.prefix(6)))
    func token(_ what: String, _ write: @Sendable () async throws -> Void) async throws {
      let control = CallControl(deadline: nil)
      try await CallControl.$current.withValue(control) { try await write() }
      try Self.require(
        control.changeToken == store.latestChange && store.latestChange > 0,
        "\(what) leaves the call its change token: \(String(describing: control.changeToken)), the feed ends at \(store.latestChange)"
      )
    }
    var twelve = EmployeeChanges()
    twelve.vacationDays = 12
    let changes = twelve
    try await token("a create") {
      _ = try await store.createEmployee(Self.person("Token Person"), context: Self.writer)
    }
    try await token("an update") {
      _ = try await store.updateEmployee(guid: made[0].guid, changes: changes, context: Self.writer)
    }
    try await token("a delete") {
      try await store.deleteEmployee(guid: made[1].guid, context: Self.writer)
    }
    try await token("an upsert") {
      _ = try await store.upsertEmployees(
        Self.stream([[UpsertRow(guid: made[2].guid, changes: changes)]]),
        context: Self.writer,
        chunkRows: nil
      )
    }
    var thirteen = EmployeeChanges()
    thirteen.vacationDays = 13
    try await token("a batch update") { [thirteen] in
      _ = try await store.batchUpdateEmployees(
        filter: EmployeeFilter(department: made[3].department),
        changes: thirteen,
        context: Self.writer
      )
    }
    try await token("a batch delete") {
      _ = try await store.deleteEmployees(
        filter: EmployeeFilter(department: made[4].department),
        limit: 1,
        context: Self.writer
      )
    }
    let read = CallControl(deadline: nil)
    _ = try await CallControl.$current.withValue(read) {
      try await store.employee(guid: made[5].guid, fields: .all)
    }
    try Self.require(read.changeToken == nil, "a read leaves no change token")
  }

  static func stream<Element: Sendable>(_ batches: [Element]) -> AsyncStream<Element> {
    AsyncStream { continuation in
      for batch in batches { continuation.yield(batch) }
      continuation.finish()
    }
  }
}
