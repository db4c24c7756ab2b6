import ArgumentParser
import Foundation
import Logging
import RosterServer
import ServiceLifecycle

/// `roster serve`: runs the gRPC server on the embedded database.
struct Serve: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Serve the directory over gRPC (seeding demo data on first start)."
  )

  @Option(help: "Address to bind (env ROSTER_HOST).")
  var host: String = ProcessInfo.processInfo.environment["ROSTER_HOST"] ?? "127.0.0.1"

  @Option(help: "Port to bind; 0 picks a free one (env ROSTER_PORT).")
  var port: Int = Int(ProcessInfo.processInfo.environment["ROSTER_PORT"] ?? "") ?? 50051

  @Option(help: "SQLite database path (env ROSTER_DB).")
  var db: String = ProcessInfo.processInfo.environment["ROSTER_DB"] ?? "data/roster.sqlite"

  @Option(help: "Demo employees to create when the database is new; 0 for an empty directory.")
  var seedEmployees: Int = 1000

  @Option(help: "Page cache per connection, in KiB.")
  var cacheSizeKib: Int = 32 * 1024

  @Option(help: "Bytes of the database to memory-map.")
  var mmapSize: Int = 256 * 1024 * 1024

  @Flag(help: "Log every SQL statement with its duration.")
  var sqlDebug = false

  func validate() throws {
    guard (0...65535).contains(self.port) else {
      throw ValidationError("--port must be between 0 and 65535")
    }
    guard self.seedEmployees >= 0 else {
      throw ValidationError("--seed-employees must not be negative")
    }
  }

  func run() async throws {
    LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
    let logger = Logger(label: "roster")
    var config = ServerConfig(databasePath: self.db)
    config.host = self.host
    config.port = self.port
    config.seedEmployees = self.seedEmployees
    config.store.cacheSizeKiB = self.cacheSizeKib
    config.store.mmapSize = self.mmapSize
    config.store.sqlDebug = self.sqlDebug

    let app = try await buildServer(config: config, logger: logger)
    let group = ServiceGroup(
      services: [app],
      gracefulShutdownSignals: [.sigterm, .sigint],
      logger: logger
    )
    try await withThrowingDiscardingTaskGroup { tasks in
      tasks.addTask { try await group.run() }
      let address = try await app.listeningAddress
      // Unbuffered, so scripts and tests that read the port see it at once.
      FileHandle.standardOutput.write(Data("listening on \(address)\n".utf8))
    }
  }
}
