public import Foundation
public import RosterSQLite
public import RosterDomain
import RosterSeed

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
  if employees > 0 {
    _ = try await store.importEmployees(DemoData(count: employees).lazy.map(\.employee))
  }
  if !extra.isEmpty {
    _ = try await store.importEmployees(extra)
  }
  return try await body(store)
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
