public import Foundation
internal import RosterDomain
public import RosterStore

/// The behaviour the services rely on, written once against the store protocols and run
/// against every backend (`RosterSQLiteTests/StoreContractTests` runs it on SQLite).
///
/// Each clause gets a new, empty store and throws `ContractViolation` naming what differed.
/// The clauses use only the protocols, so a second backend passes by passing them.
public enum StoreContract {
  /// Everything a backend implements.
  public typealias Store = any StoreBackend

  /// One behaviour.
  public enum Clause: String, CaseIterable, Sendable, CustomStringConvertible {
    case createAndRead
    case refusalsChangeNothing
    case batchReadKeepsOrder
    case pagesCoverEveryRowOnceInOrder
    case writtenPagesAreReadPages
    case filtersAgreeWithCounts
    case updateChangesOnlyWhatItSets
    case deleteRemoves
    case upsertMergesAndReports
    case bulkWritesReportWhatTheyDid
    case changeFeedIsGaplessAndOrdered
    case watchersWakeOnCommit
    case watchEndsWithItsCall
    case salesAreExactCents
    case countersMatchRecounts
    case picturesRoundTrip
    case copyReadsSalesAndReferencesPictures
    case bulkRefusalsAreCountedAndBounded
    case lookupByEmail
    case writesCarryTheirChangeToken
    case bulkLoadIsLoggedAsOneGap

    public var description: String { self.rawValue }
  }

  /// What a clause needs besides the store.
  public struct Fixtures: Sendable {
    /// A small JPEG picture that the backend can thumbnail.
    public var jpeg: Data

    /// Creates fixtures.
    public init(jpeg: Data) {
      self.jpeg = jpeg
    }
  }

  /// Runs `clause` against `store`, which must be empty.
  public static func check(_ clause: Clause, _ store: Store, _ fixtures: Fixtures) async throws {
    switch clause {
    case .createAndRead: try await Self.createAndRead(store)
    case .refusalsChangeNothing: try await Self.refusalsChangeNothing(store)
    case .batchReadKeepsOrder: try await Self.batchReadKeepsOrder(store)
    case .pagesCoverEveryRowOnceInOrder: try await Self.pagesCoverEveryRowOnceInOrder(store)
    case .writtenPagesAreReadPages: try await Self.writtenPagesAreReadPages(store, fixtures)
    case .filtersAgreeWithCounts: try await Self.filtersAgreeWithCounts(store)
    case .updateChangesOnlyWhatItSets: try await Self.updateChangesOnlyWhatItSets(store)
    case .deleteRemoves: try await Self.deleteRemoves(store)
    case .upsertMergesAndReports: try await Self.upsertMergesAndReports(store)
    case .bulkWritesReportWhatTheyDid: try await Self.bulkWritesReportWhatTheyDid(store)
    case .changeFeedIsGaplessAndOrdered: try await Self.changeFeedIsGaplessAndOrdered(store)
    case .watchersWakeOnCommit: try await Self.watchersWakeOnCommit(store)
    case .watchEndsWithItsCall: try await Self.watchEndsWithItsCall(store)
    case .salesAreExactCents: try await Self.salesAreExactCents(store)
    case .countersMatchRecounts: try await Self.countersMatchRecounts(store)
    case .picturesRoundTrip: try await Self.picturesRoundTrip(store, fixtures)
    case .copyReadsSalesAndReferencesPictures:
      try await Self.copyReadsSalesAndReferencesPictures(store, fixtures)
    case .bulkRefusalsAreCountedAndBounded: try await Self.bulkRefusalsAreCountedAndBounded(store)
    case .lookupByEmail: try await Self.lookupByEmail(store)
    case .writesCarryTheirChangeToken: try await Self.writesCarryTheirChangeToken(store)
    case .bulkLoadIsLoggedAsOneGap: try await Self.bulkLoadIsLoggedAsOneGap(store)
    }
  }
}

/// A clause of the store contract that a backend broke.
public struct ContractViolation: Error, CustomStringConvertible {
  public var description: String
}

// MARK: Helpers

extension StoreContract {
  static let writer = WriteContext(author: "contract")

  static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw ContractViolation(description: message()) }
  }

  /// Runs `body` and requires it to throw a `StoreError` of `code` whose message contains
  /// `naming`.
  static func requireError(
    _ code: StoreError.Code,
    naming: String,
    _ what: String,
    _ body: () async throws -> Void
  ) async throws {
    do {
      try await body()
    } catch let error as StoreError {
      try Self.require(
        error.code == code,
        "\(what): \(error.code), expected \(code) (\(error.message))"
      )
      try Self.require(
        error.message.contains(naming),
        "\(what): the message '\(error.message)' does not name '\(naming)'"
      )
      try Self.require(
        !error.message.uppercased().contains("SELECT "),
        "\(what): SQL in '\(error.message)'"
      )
      return
    }
    throw ContractViolation(description: "\(what): no error, expected \(code)")
  }

  /// A new employee with a new guid (the services make one when a client gives none).
  static func person(
    _ name: String,
    department: String = "Sales",
    active: Bool = true,
    start: String = "2020-01-01"
  )
    -> Employee
  {
    var employee = Employee()
    employee.guid = UUID().uuidString.lowercased()
    employee.name = name
    employee.department = department
    employee.active = active
    employee.startDate = start
    employee.email = name.lowercased().replacingOccurrences(of: " ", with: ".") + "@example.com"
    employee.vacationDays = 10
    return employee
  }

  /// Creates `names` in order, alternating departments and active flags.
  static func create(_ store: Store, _ names: [String]) async throws -> [Employee] {
    var made: [Employee] = []
    for (index, name) in names.enumerated() {
      let employee = Self.person(
        name,
        department: ["Sales", "Design", "Engineering"][index % 3],
        active: index % 4 != 3,
        start: "20\(10 + index % 15)-0\(1 + index % 9)-1\(index % 10)"
      )
      made.append(try await store.createEmployee(employee, context: Self.writer))
    }
    return made
  }

  static let names = [
    "José Núñez", "Ada Lovelace", "Grace Hopper", "Zoë Example", "Øyvind Berg", "Łucja Łęcka",
    "jose nunez", "Alan Turing", "Barbara Liskov", "Edsger Dijkstra", "Ken Thompson",
    "Dennis Ritchie", "Margaret Hamilton", "Katherine Johnson", "Radia Perlman", "Frances Allen",
    "John Backus", "Niklaus Wirth", "Donald Knuth", "Leslie Lamport", "Tony Hoare",
    "Anita Borg", "Jean Sammet",
  ]

  /// The pages of a listing, `count` at a time (`employeePages`), as guids and cursors.
  static func pages(
    _ store: Store,
    order: EmployeeOrder,
    filter: EmployeeFilter = EmployeeFilter(),
    size: Int,
    count: Int
  ) async throws -> [PageShape] {
    var shapes: [PageShape] = []
    var cursor: EmployeeCursor?
    repeat {
      let pages = try await store.employeePages(
        fields: .all,
        filter: filter,
        order: order,
        after: cursor,
        limit: size,
        count: count
      )
      try Self.require(
        !pages.isEmpty && pages.count <= count,
        "\(count) pages at once gave \(pages.count)"
      )
      for (index, page) in pages.enumerated() {
        try Self.require(
          index == pages.count - 1 || page.next != nil,
          "a page before the last of a read said none follow"
        )
        shapes.append(PageShape(guids: page.employees.map(\.guid), next: page.next))
      }
      cursor = pages[pages.count - 1].next
    } while cursor != nil
    return shapes
  }

  /// A page's employees and cursor.
  struct PageShape: Equatable {
    var guids: [String]
    var next: EmployeeCursor?
  }

  /// Every employee, walked in pages of `size` in `order`.
  static func walk(
    _ store: Store,
    order: EmployeeOrder,
    filter: EmployeeFilter = EmployeeFilter(),
    size: Int
  ) async throws -> [Employee] {
    var all: [Employee] = []
    var cursor: EmployeeCursor?
    repeat {
      let page = try await store.employeePage(
        fields: .all,
        filter: filter,
        order: order,
        after: cursor,
        limit: size
      )
      try Self.require(
        page.employees.count <= size,
        "a page of \(size) held \(page.employees.count)"
      )
      try Self.require(
        page.next == nil || page.employees.count == size,
        "a short page said more follow"
      )
      all += page.employees
      cursor = page.next
    } while cursor != nil
    return all
  }
}
