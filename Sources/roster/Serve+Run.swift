import ArgumentParser
import Foundation
import Logging
import Metrics
import OTel
import Prometheus
import RosterDomain
import RosterPostgres
import RosterProtocols
import RosterSQLite
import RosterServer
import RosterServices
import RosterStore
import ServiceLifecycle
import Tracing

extension Serve {
  func run() async throws {
    // Before anything uses NIO's shared event loops.
    ServerThreads.useEventLoops(self.eventLoops ?? ServerThreads.availableCPUs)
    let tracing = try self.tracingBackend()
    // With tracing on, each log line written inside a call carries its trace and span ids.
    LoggingSystem.bootstrap(
      { StreamLogHandler.standardError(label: $0, metadataProvider: $1) },
      metadataProvider: tracing.map { _ in OTel.makeLoggingMetadataProvider() }
    )
    var logger = Logger(label: "roster")
    // `debug` or `trace` for a closer look (the PostgreSQL pool's own events among them).
    if let level = ProcessInfo.processInfo.environment["ROSTER_LOG_LEVEL"].flatMap(
      Logger.Level.init(rawValue:)
    ) {
      logger.logLevel = level
    }
    var config = try self.serverConfig()
    if let signIn = config.signIn {
      logger.info(
        "sign-in on",
        metadata: [
          "issuer": "\(signIn.verifier.settings.issuer)",
          "audience": "\(signIn.verifier.settings.audience)",
        ]
      )
    }
    if let path = self.tokens {
      do {
        config.tokens = try TokenTable(contentsOfFile: path)
      } catch {
        throw ValidationError("--tokens \(path): \(error)")
      }
      logger.info("authentication on", metadata: ["tokens": "\(config.tokens?.count ?? 0)"])
    } else if config.signIn == nil, !Self.isLoopback(self.host) {
      let warning =
        "WARNING: --insecure: serving \(self.host) with no authentication; anyone who can reach it can read, change and delete everything"
      FileHandle.standardError.write(
        Data(
          ("\n" + String(repeating: "!", count: 80) + "\n" + warning + "\n"
            + String(repeating: "!", count: 80) + "\n\n").utf8
        )
      )
    }

    var services: [any Service] = []
    if let tracing {
      InstrumentationSystem.bootstrap(tracing.tracer)
      StoreTracing.switchOn()
      config.tracing = true
      // First in the group, so it stops last and exports the spans of the last calls.
      services.append(tracing.service)
      logger.info("tracing on", metadata: ["otlp": "\(tracing.endpoint)"])
    }
    if let metricsPort = self.metricsPort {
      // Bootstrapped before the store and services exist, so their metrics report here.
      let registry = PrometheusCollectorRegistry()
      MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
      services.append(
        MetricsEndpoint(host: self.host, port: metricsPort, registry: registry) { port in
          FileHandle.standardOutput.write(
            Data("metrics on http://\(self.host):\(port)/metrics\n".utf8)
          )
        }
      )
    }
    let app = try await buildServer(config: config, logger: logger)
    services.append(app)
    let group = ServiceGroup(
      services: services,
      gracefulShutdownSignals: [.sigterm, .sigint],
      logger: logger
    )
    try await withThrowingDiscardingTaskGroup { tasks in
      tasks.addTask { try await group.run() }
      // No address when the server stopped before it listened (a SIGTERM while it started, or
      // a failure, which the group's run reports).
      guard let address = try? await app.listeningAddress else { return }
      // Unbuffered, so scripts and tests that read the port see it at once.
      FileHandle.standardOutput.write(Data("listening on \(address)\n".utf8))
      logger.info("released startup pages", metadata: StartupPages.release())
    }
  }
}
