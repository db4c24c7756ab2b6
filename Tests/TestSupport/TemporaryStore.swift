public import Foundation
public import RosterDomain
public import RosterPictures
public import RosterSQLite
import RosterSeed
public import RosterStore

/// A store on a fresh WAL database in its own temporary directory, removed afterwards.
///
/// ```swift
/// try await withTemporaryStore(employees: 500) { store in
///   #expect(try await store.countEmployees(filter: EmployeeFilter()) == 500)
/// }
/// ```
@discardableResult
public func withTemporaryStore<T>(
  employees: Int = 0,
  extra: [Employee] = [],
  configure: (inout StoreConfiguration) -> Void = { _ in },
  _ body: (SQLiteStore) async throws -> T
) async throws -> T {
  let directory = try makeTemporaryDirectory()
  defer { try? FileManager.default.removeItem(atPath: directory) }
  var configuration = StoreConfiguration(path: directory + "/test.sqlite")
  configure(&configuration)
  let store = try SQLiteStore(configuration: configuration)
  try await fill(store, employees: employees, extra: extra)
  return try await body(store)
}

/// The backends a test can run on: SQLite always; PostgreSQL too under `scripts/postgres run`
/// (or wherever `ROSTER_TEST_POSTGRES_URL` names a server).
public enum TestBackend: String, CaseIterable, Sendable {
  case sqlite, postgres

  /// The backends this run can test: both with a PostgreSQL server, else SQLite alone.
  public static var available: [TestBackend] {
    PostgresTesting.enabled ? Self.allCases : [.sqlite]
  }
}

/// A fresh, empty store on `backend` (SQLite: a temporary directory; PostgreSQL: a schema of
/// its own, its service running), with `employees` demo employees and `extra` in it, removed
/// after `body`.
@discardableResult
public func withTemporaryStore<T>(
  on backend: TestBackend,
  employees: Int = 0,
  extra: [Employee] = [],
  pictures: (inout PictureConfiguration) -> Void = { _ in },
  _ body: (any StoreBackend) async throws -> T
) async throws -> T {
  switch backend {
  case .sqlite:
    return try await withTemporaryStore(
      employees: employees,
      extra: extra,
      configure: { pictures(&$0.pictures) }
    ) {
      store in try await body(store)
    }
  case .postgres:
    var configuration = try PostgresTesting.configuration()
    pictures(&configuration.pictures)
    return try await PostgresTesting.withStore(configuration) { store in
      try await fill(store, employees: employees, extra: extra)
      return try await body(store)
    }
  }
}

private func fill(_ store: some DirectoryStore, employees: Int, extra: [Employee]) async throws {
  if employees > 0 {
    _ = try await store.importEmployees(DemoData(count: employees).lazy.map(\.employee))
  }
  if !extra.isEmpty {
    _ = try await store.importEmployees(extra)
  }
}

/// A new, empty temporary directory.
public func makeTemporaryDirectory() throws -> String {
  let path = FileManager.default.temporaryDirectory
    .appendingPathComponent("roster-test-\(UUID().uuidString)").path
  try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  return path
}

/// A valid employee for tests, with a random guid unless one is given.
public func makeEmployee(
  name: String,
  department: String = "Engineering",
  active: Bool = true,
  startDate: String = "2020-01-15",
  guid: String = UUID().uuidString.lowercased()
) -> Employee {
  var employee = Employee()
  employee.guid = guid
  employee.name = name
  employee.department = department
  employee.active = active
  employee.startDate = startDate
  employee.email = "someone@example.com"
  employee.vacationDays = 10
  return employee
}
