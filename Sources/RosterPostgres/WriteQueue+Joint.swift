internal import PostgresNIO
internal import RosterDomain

extension WriteQueue {
  /// A write a batch runs in one statement with the others of its kind next to it, and how it
  /// ends given what that statement gave it and the time it was written at. Its job's `run`
  /// does the same alone.
  enum Joint: Sendable {
    /// An update (`EmployeeUpdates`), ended given the row it read as it was (nil: no such
    /// employee).
    case update(
      EmployeeUpdate,
      finish: @Sendable (WriteTransaction, PostgresRandomAccessRow?, Int64) async -> Outcome
    )
    /// A new employee (`EmployeeInserts`), ended given its row's id (nil: the guid is taken).
    case insert(Employee, finish: @Sendable (WriteTransaction, Int64?, Int64) async -> Outcome)

    /// The employee it writes.
    var guid: String {
      switch self {
      case .update(let statement, _): statement.guid
      case .insert(let employee, _): employee.guid
      }
    }
  }

  /// The updates and creates from `index` on that one statement of each kind can run: next to
  /// each other, each of a different employee (a second write of one employee waits for the
  /// next statements, so it sees the first); nil for fewer than two.
  static func writesTogether(_ batch: [Job], from index: Int) -> ArraySlice<Job>? {
    var guids: Set<String> = []
    var end = index
    while end < batch.count, let joint = batch[end].joint, guids.insert(joint.guid).inserted {
      end += 1
    }
    return end - index >= 2 ? batch[index ..< end] : nil
  }

  /// What the statements of a run of joint writes gave back: the rows the updates read as they
  /// were, and the ids of the employees created, by guid.
  struct Written {
    var rows: [String: PostgresRandomAccessRow] = [:]
    var ids: [String: Int64] = [:]
  }

  /// Writes `run` (`writesTogether`): its creates in one statement, then its updates in
  /// another. Each writes different employees, so the order between the two changes nothing.
  static func write(
    _ run: ArraySlice<Job>,
    now: Int64,
    in transaction: WriteTransaction
  ) async throws -> Written {
    var updates: [EmployeeUpdate] = []
    var employees: [Employee] = []
    for job in run {
      switch job.joint {
      case .update(let statement, _): updates.append(statement)
      case .insert(let employee, _): employees.append(employee)
      case nil: break
      }
    }
    var written = Written()
    if !employees.isEmpty {
      for row in try await transaction.rows(EmployeeInserts(employees: employees, now: now)) {
        written.ids[try row[1].decode(String.self)] = try row[0].decode(Int64.self)
      }
    }
    if !updates.isEmpty {
      for row in try await transaction.rows(EmployeeUpdates(updates: updates, now: now)) {
        written.rows[try row[1].decode(String.self)] = row
      }
    }
    return written
  }
}
