import Foundation
import GRDB
import GRPCCore
import GRPCNIOTransportHTTP2
import Logging
import PostgresNIO
import RosterProto
import Synchronization
import TestSupport
import Testing

/// SIGKILL under a sustained concurrent write load, over and over: no acknowledged write is
/// ever lost, the database stays intact, and the change log has no gaps.
///
/// `ROSTER_CRASH_ROUNDS` sets the number of rounds (10 by default) for longer runs. With
/// `ROSTER_TEST_POSTGRES_URL` (`scripts/postgres run`), the same rounds run against
/// `roster serve --postgres` too.
@Suite("Crash safety", .timeLimit(.minutes(15)), .serialized)
struct CrashTests {
  /// What a worker knows of one employee it owns.
  struct Tracked: Sendable {
    /// The values of the last acknowledged write, if any was acknowledged.
    var acked: Snapshot?
    /// The values of a write that was in flight when the server died: it may or may not
    /// have committed.
    var pending: Snapshot?
    /// Acknowledged writes, each of which must have logged one change.
    var ackedWrites = 0
  }

  struct Snapshot: Sendable, Equatable {
    var vacationDays: Int
    var about: String
  }

  static let rounds = Int(ProcessInfo.processInfo.environment["ROSTER_CRASH_ROUNDS"] ?? "") ?? 10
  static let workers = 8

  @Test(
    "acknowledged writes survive SIGKILL at random moments, round after round",
    arguments: TestBackend.available
  )
  func killUnderLoad(_ backend: TestBackend) async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/crash.sqlite"
    let schema = "crash_" + UUID().uuidString.prefix(8).lowercased()
    let postgresURL = PostgresTesting.url ?? ""
    let arguments =
      backend == .sqlite
      ? ["--db", path, "--seed-employees", "0"]
      : ["--postgres", postgresURL, "--postgres-schema", schema, "--seed-employees", "0"]
    var tracked: [String: Tracked] = [:]
    var totalAcked = 0
    for round in 0 ..< Self.rounds {
      let server = try await RosterProcess.serve(arguments: arguments)
      let stop = StopFlag()
      let acks = Tally()
      let failures = Tally()
      let ownedByWorker = Self.partition(tracked)
      let results = try await withGRPCClient(
        transport: .http2NIOPosix(
          target: .ipv4(address: "127.0.0.1", port: server.port),
          transportSecurity: .plaintext
        )
      ) { client in
        let directoryClient = Roster_V1_Directory.Client(wrapping: client)
        return try await withThrowingTaskGroup(of: [String: Tracked].self) { group in
          for worker in 0 ..< Self.workers {
            let owned = ownedByWorker[worker] ?? [:]
            group.addTask {
              await Self.work(
                directoryClient,
                worker: worker,
                round: round,
                owned: owned,
                stop: stop,
                acks: acks,
                failures: failures
              )
            }
          }
          // The load is under way (a dozen writes acknowledged), then a random moment later,
          // the kill. No clock bounds the start: when all suites start at once, this process
          // can wait minutes for a thread (a 60 s window once saw no write acknowledged). A
          // write that fails ends the wait; a server that never answers meets the suite's
          // time limit.
          while acks.count < 12 && failures.count == 0 {
            try await Task.sleep(for: .milliseconds(10))
          }
          #expect(acks.count >= 12, "round \(round): the load did not get going")
          try await Task.sleep(for: .milliseconds(Int.random(in: 0 ... 550)))
          stop.set()
          server.kill()
          var merged: [String: Tracked] = [:]
          for try await part in group { merged.merge(part) { $1 } }
          return merged
        }
      }
      tracked = results
      totalAcked = tracked.values.reduce(0) { $0 + $1.ackedWrites }
      let left =
        backend == .sqlite
        ? try Self.readSQLite(path)
        : try await Self.readPostgres(url: postgresURL, schema: schema)
      tracked = Self.verify(left, tracked: tracked, round: round)
    }
    print("CrashTests (\(backend)): \(totalAcked) acknowledged writes over \(Self.rounds) rounds")
    #expect(totalAcked > Self.rounds * 10, "the load acknowledged \(totalAcked) writes")
  }

  /// Splits the tracked employees among workers; each worker owns its guids, so the writes
  /// to one employee are sequential and "the acknowledged value" is well defined.
  static func partition(_ tracked: [String: Tracked]) -> [Int: [String: Tracked]] {
    var parts: [Int: [String: Tracked]] = [:]
    for (guid, state) in tracked {
      let worker = abs(guid.hashValue) % Self.workers
      parts[worker, default: [:]][guid] = state
    }
    return parts
  }

  /// Creates, updates and upserts until stopped or the server dies.
  static func work(
    _ directory: Roster_V1_Directory.Client<HTTP2ClientTransport.Posix>,
    worker: Int,
    round: Int,
    owned: [String: Tracked],
    stop: StopFlag,
    acks: Tally,
    failures: Tally
  ) async -> [String: Tracked] {
    var owned = owned
    var options = CallOptions.defaults
    // Long enough that a write slowed by the start of a full run is not an error; a kill
    // fails the calls in flight at once, whatever their deadline.
    options.timeout = .seconds(60)
    options.waitForReady = false
    var counter = 0
    while !stop.isSet {
      counter += 1
      let tag = "w\(worker)-r\(round)-\(counter)"
      let known = owned.filter { $0.value.acked != nil }.map(\.key)
      let choice = known.isEmpty ? 0 : Int.random(in: 0 ..< 3)
      // The guids this request writes, and the values it writes to each.
      var writes: [(String, Snapshot)] = []
      do {
        switch choice {
        case 0:
          let guid = UUID().uuidString.lowercased()
          let snapshot = Snapshot(vacationDays: counter, about: tag)
          writes = [(guid, snapshot)]
          owned[guid, default: Tracked()].pending = snapshot
          _ = try await directory.createEmployee(
            .with { $0.employee = Self.employee(guid: guid, snapshot, full: true) },
            options: options
          )
        case 1:
          let guid = known.randomElement()!
          let snapshot = Snapshot(vacationDays: counter, about: tag)
          writes = [(guid, snapshot)]
          owned[guid]!.pending = snapshot
          _ = try await directory.updateEmployee(
            .with {
              $0.employee = Self.employee(guid: guid, snapshot, full: false)
              $0.updateMask.paths = ["vacation_days", "about"]
            },
            options: options
          )
        default:
          let existing = Array(Set(known.shuffled().prefix(2)))
          let fresh = UUID().uuidString.lowercased()
          for (offset, guid) in (existing + [fresh]).enumerated() {
            let snapshot = Snapshot(vacationDays: counter * 10 + offset, about: "\(tag)-\(offset)")
            writes.append((guid, snapshot))
            owned[guid, default: Tracked()].pending = snapshot
          }
          let rows = writes.map { guid, snapshot in
            Self.employee(guid: guid, snapshot, full: guid == fresh)
          }
          let response = try await directory.upsertEmployees(
            request: StreamingClientRequest { writer in
              try await writer.write(.with { $0.employees = rows })
            },
            options: options
          ) { try $0.message }
          if !response.rejected.isEmpty {
            Issue.record("upsert rejected rows: \(response.rejected)")
          }
        }
        for (guid, snapshot) in writes {
          owned[guid]!.acked = snapshot
          owned[guid]!.pending = nil
          owned[guid]!.ackedWrites += 1
        }
        acks.add()
      } catch {
        // The server died with this request in flight: it may or may not have committed.
        // Before the kill, no write may fail.
        if !stop.isSet {
          failures.add()
          Issue.record("worker \(worker), round \(round): a write failed before the kill: \(error)")
        }
        return owned
      }
    }
    return owned
  }

  static func employee(guid: String, _ snapshot: Snapshot, full: Bool) -> Roster_V1_Employee {
    .with {
      $0.guid = guid
      $0.vacationDays = Int32(snapshot.vacationDays)
      $0.about = snapshot.about
      if full {
        $0.name = "Crash \(guid.prefix(8))"
        $0.department = "Reliability"
        $0.startDate = "2024-02-29"
      }
    }
  }

  /// What a killed server left behind.
  struct Leftover {
    var intact: Bool
    var logCount: Int64
    var firstSequence: Int64
    var lastSequence: Int64
    var stored: [String: Snapshot]
    var logged: [String: Int]
  }

  static func readSQLite(_ path: String) throws -> Leftover {
    let queue = try DatabaseQueue(path: path)
    defer { try? queue.close() }
    return try queue.read { db in
      let log = try Row.fetchOne(
        db,
        sql: "SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM change_log"
      )!
      var left = Leftover(
        intact: try String.fetchAll(db, sql: "PRAGMA integrity_check") == ["ok"],
        logCount: log[0],
        firstSequence: log[1],
        lastSequence: log[2],
        stored: [:],
        logged: [:]
      )
      for row in try Row.fetchAll(db, sql: "SELECT guid, vacation_days, about FROM employees") {
        left.stored[row[0]] = Snapshot(vacationDays: row[1], about: row[2])
      }
      for row in try Row.fetchAll(db, sql: "SELECT guid, count(*) FROM change_log GROUP BY guid") {
        left.logged[row[0]] = row[1]
      }
      return left
    }
  }

  static func readPostgres(url: String, schema: String) async throws -> Leftover {
    let components = URLComponents(string: url)!
    var configuration = PostgresConnection.Configuration(
      host: components.host!,
      port: components.port ?? 5432,
      username: components.user!,
      password: components.password,
      database: String(components.path.dropFirst()),
      tls: .disable
    )
    configuration.options.additionalStartupParameters = [("search_path", schema)]
    let connection = try await PostgresConnection.connect(
      configuration: configuration,
      id: 1,
      logger: Logger(label: "crash")
    )
    do {
      // A transaction whose COMMIT the killed server had sent is still committing in its
      // backend, which PostgreSQL ends only once it finds the socket closed: a read made at
      // once could see the state before that late commit, and the next round then found the
      // unacknowledged write in place of the acknowledged one. SHARE mode waits for every
      // transaction that writes these tables to end (the server's writes are all explicit
      // transactions, which hold their locks until then), and keeps new ones out meanwhile.
      _ = try await connection.query("BEGIN", logger: connection.logger)
      _ = try await connection.query(
        "LOCK TABLE employees, change_log IN SHARE MODE",
        logger: connection.logger
      )
      var left = Leftover(
        intact: true,
        logCount: 0,
        firstSequence: 0,
        lastSequence: 0,
        stored: [:],
        logged: [:]
      )
      for try await (count, first, last) in try await connection.query(
        "SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM change_log",
        logger: connection.logger
      ).decode((Int64, Int64, Int64).self) {
        (left.logCount, left.firstSequence, left.lastSequence) = (count, first, last)
      }
      for try await (guid, days, about) in try await connection.query(
        "SELECT guid, vacation_days, about FROM employees",
        logger: connection.logger
      ).decode((String, Int, String).self) {
        left.stored[guid] = Snapshot(vacationDays: days, about: about)
      }
      for try await (guid, count) in try await connection.query(
        "SELECT guid, count(*) FROM change_log GROUP BY guid",
        logger: connection.logger
      ).decode((String, Int).self) {
        left.logged[guid] = count
      }
      _ = try await connection.query("COMMIT", logger: connection.logger)
      try await connection.close()
      return left
    } catch {
      try? await connection.close()
      throw error
    }
  }

  /// Checks what the killed server left behind, and returns what it now holds as the
  /// acknowledged state for the next round.
  static func verify(_ left: Leftover, tracked: [String: Tracked], round: Int) -> [String: Tracked]
  {
    #expect(left.intact, "round \(round): the database is damaged")
    let (count, first, last) = (left.logCount, left.firstSequence, left.lastSequence)
    #expect(count == (last == 0 ? 0 : last - first + 1), "round \(round): the log has gaps")
    let (stored, logged) = (left.stored, left.logged)
    do {
      var next: [String: Tracked] = [:]
      for (guid, state) in tracked {
        let now = stored[guid]
        if let acked = state.acked {
          #expect(
            now == acked || (now != nil && now == state.pending),
            "round \(round): \(guid) acknowledged \(acked), holds \(String(describing: now))"
          )
        } else if let now {
          #expect(now == state.pending, "round \(round): \(guid) holds a value never written")
        }
        let changes = logged[guid] ?? 0
        let extra = state.pending == nil ? 0 : 1
        #expect(
          changes >= state.ackedWrites && changes <= state.ackedWrites + extra,
          "round \(round): \(guid) has \(changes) logged changes for \(state.ackedWrites) acked"
        )
        if let now {
          next[guid] = Tracked(acked: now, pending: nil, ackedWrites: changes)
        }
      }
      return next
    }
  }
}

/// A flag the load workers poll, set once when the server is about to be killed.
final class StopFlag: Sendable {
  private let value = Atomic(false)

  func set() { self.value.store(true, ordering: .relaxed) }
  var isSet: Bool { self.value.load(ordering: .relaxed) }
}
