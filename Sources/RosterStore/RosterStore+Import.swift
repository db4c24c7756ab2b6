internal import Foundation
internal import GRDB

/// What a bulk import did.
public struct ImportSummary: Sendable, Hashable {
  /// Rows written (inserted, or merged into an existing guid).
  public var imported: Int = 0
  /// Rows refused, with their zero-based index in the input and the reason.
  public var rejected: [Rejected] = []

  /// Creates an empty summary.
  public init() {}

  /// One refused row.
  public struct Rejected: Sendable, Hashable {
    /// Zero-based position in the input.
    public var index: Int
    /// Why, naming the field.
    public var reason: String
  }
}

extension RosterStore {
  // MARK: Bulk import

  /// Rows per import transaction: large enough to amortise the commit, small enough to bound
  /// memory and the time the writer is held.
  public static let importBatchSize = 20_000

  /// Imports employees through one prepared statement, one transaction per batch.
  ///
  /// Rows are merged by guid: an existing guid gets the imported values. Invalid rows are
  /// reported and skipped; they never stop the valid ones.
  public func importEmployees(_ employees: some Sequence<Employee>) throws -> ImportSummary {
    var summary = ImportSummary()
    var batch: [Employee] = []
    batch.reserveCapacity(Self.importBatchSize)
    var index = 0
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    for employee in employees {
      defer { index += 1 }
      do {
        batch.append(try EmployeeValidation.validated(employee))
      } catch let error as StoreError {
        summary.rejected.append(.init(index: index, reason: error.message))
        continue
      }
      if batch.count == Self.importBatchSize {
        summary.imported += try self.insertBatch(batch, now: now)
        batch.removeAll(keepingCapacity: true)
      }
    }
    if !batch.isEmpty {
      summary.imported += try self.insertBatch(batch, now: now)
    }
    return summary
  }

  private func insertBatch(_ batch: [Employee], now: Int64) throws -> Int {
    try self.write { db in
      let statement = try db.cachedStatement(
        sql: """
          INSERT INTO employees (guid, name, name_folded, department, email, phone, address,
            about, active, start_date, vacation_days, update_time)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
          ON CONFLICT(guid) DO UPDATE SET
            name = excluded.name, name_folded = excluded.name_folded,
            department = excluded.department, email = excluded.email, phone = excluded.phone,
            address = excluded.address, about = excluded.about, active = excluded.active,
            start_date = excluded.start_date, vacation_days = excluded.vacation_days,
            update_time = excluded.update_time
          """
      )
      for employee in batch {
        try statement.execute(arguments: [
          employee.guid, employee.name, TextFolding.fold(employee.name), employee.department,
          employee.email, employee.phone, employee.address, employee.about, employee.active,
          employee.startDate, employee.vacationDays, now,
        ])
      }
      return batch.count
    }
  }
}
