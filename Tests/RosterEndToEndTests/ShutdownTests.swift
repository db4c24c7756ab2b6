import Foundation
import GRDB
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterLocks
import RosterProto
import TestSupport
import Testing

/// SIGTERM under a steady write load: every call either completes or gets `UNAVAILABLE`,
/// every acknowledged write is in the database afterwards, the process exits 0, and the
/// final TRUNCATE checkpoint leaves an empty WAL.
@Suite("Graceful shutdown", .timeLimit(.minutes(10)))
struct ShutdownTests {
  static let workers = 8

  /// What the workers saw: the guids of acknowledged creates, and the codes of failures.
  final class Outcome: Sendable {
    let acknowledged = Locked<[String]>([])
    let failures = Locked<[RPCError.Code]>([])
  }

  @Test("SIGTERM under load loses nothing acknowledged, and every refused call is UNAVAILABLE")
  func sigtermUnderLoad() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/shutdown.sqlite"
    let server = try await RosterProcess.serve(arguments: [
      "--db", path, "--seed-employees", "50", "--no-seed-pictures", "--seed-sales-per-employee",
      "0",
      "--no-log-requests",
    ])
    let outcome = Outcome()
    let exitStatus = try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: server.port),
        transportSecurity: .plaintext
      )
    ) { client in
      let directoryClient = Roster_V1_Directory.Client(wrapping: client)
      return try await withThrowingTaskGroup(of: Int32?.self) { group in
        for worker in 0 ..< Self.workers {
          group.addTask {
            // Each worker writes until its first failure; a failure after shutdown began is
            // the only kind expected.
            for index in 0 ..< 100_000 {
              do {
                let created = try await directoryClient.createEmployee(
                  .with {
                    $0.employee = .with {
                      $0.name = "Worker \(worker) row \(index)"
                      $0.department = "Shutdown"
                      $0.startDate = "2024-01-01"
                    }
                  }
                )
                outcome.acknowledged.withLock { $0.append(created.guid) }
              } catch let error as RPCError {
                outcome.failures.withLock { $0.append(error.code) }
                return nil
              }
            }
            return nil
          }
        }
        group.addTask {
          // The signal comes once the load is well under way, however slow the machine.
          while outcome.acknowledged.withLock({ $0.count }) < 300 {
            try await Task.sleep(for: .milliseconds(10))
          }
          return await Task.detached { server.terminate() }.value
        }
        var status: Int32?
        for try await result in group {
          if let result { status = result }
        }
        return status
      }
    }
    #expect(exitStatus == 0)
    let acked = outcome.acknowledged.withLock { $0 }
    let codes = outcome.failures.withLock { $0 }
    #expect(acked.count >= 300, "the load ran before the signal")
    #expect(codes.count == Self.workers, "every worker saw its writes refused at the end")
    #expect(codes.allSatisfy { $0 == .unavailable }, "\(codes)")

    // The final TRUNCATE checkpoint emptied the WAL.
    let wal = try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
    #expect((wal ?? 0) == 0)
    let stored = try await DatabaseQueue(path: path).read { db in
      Set(try String.fetchAll(db, sql: "SELECT guid FROM employees WHERE department = 'Shutdown'"))
    }
    let missing = acked.filter { !stored.contains($0) }
    #expect(missing.isEmpty, "\(missing.count) acknowledged writes lost")
  }
}
