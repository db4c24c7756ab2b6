import ArgumentParser
import Foundation
import OTel
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
  /// The server configuration the flags describe (all but the tokens file, which `run` reads).
  func serverConfig() throws -> ServerConfig {
    var config = ServerConfig(databasePath: self.db)
    // One query budget and one change-log age for either backend.
    let queryBudget: Duration? =
      self.maxQuerySeconds == 0 ? nil : .milliseconds(Int64(self.maxQuerySeconds * 1000))
    let changeLogAge = Duration.seconds(self.changeLogMaxAgeHours * 3600)
    config.host = self.host
    config.logRequests = self.logRequests
    config.cors = self.corsOrigin.isEmpty ? nil : CORSPolicy(origins: self.corsOrigin)
    config.console = self.console
    config.signIn = try self.signIn.signIn()
    if let certificate = self.tlsCert, let key = self.tlsKey {
      config.tls = TLSFiles(
        certificatePath: certificate,
        keyPath: key,
        clientCAPath: self.tlsClientCa
      )
    }
    config.limits.maxRequestBytes = self.maxRequestKib * 1024
    config.limits.maxConcurrentStreams = self.maxConcurrentStreams
    config.limits.keepaliveInterval = .seconds(self.keepaliveS)
    config.limits.keepaliveTimeout = .seconds(self.keepaliveTimeoutS)
    config.limits.maxConnectionIdle = self.maxIdleS == 0 ? nil : .seconds(self.maxIdleS)
    config.limits.maxConnectionAge = self.maxAgeS == 0 ? nil : .seconds(self.maxAgeS)
    config.limits.defaultDeadline =
      self.defaultDeadlineMs == 0 ? nil : .milliseconds(self.defaultDeadlineMs)
    config.limits.maxStreamsPerClient = self.maxStreamsPerClient
    (config.limits.callerRate, config.limits.callerRates) = try self.callerRates()
    config.shutdownGrace = .seconds(self.shutdownGraceS)
    config.port = self.port
    config.seedEmployees = self.seedEmployees
    config.seedPictures = self.seedPictures
    config.demoPictures = self.demoPictures
    config.seedSalesPerEmployee = self.seedSalesPerEmployee
    config.store.pictures.maximumBytes = Int64(self.maxPictureMb) * 1024 * 1024
    config.store.pictures.cacheBytes = self.pictureCacheMb * 1024 * 1024
    config.store.pictures.inlineMaximumBytes = self.inlinePictureMaxKib * 1024
    config.store.cacheSizeKiB = self.cacheSizeKib
    config.store.mmapSize = self.mmapSize
    config.store.sqlDebug = self.sqlDebug
    config.store.synchronous = self.synchronous
    config.store.writer.maximumBatch = self.maxWriteBatch
    config.store.writer.bulkChunkRows = self.bulkChunkRows
    config.store.writer.bulkNiceness = self.bulkNiceness
    config.store.heavyLane.width = self.heavyConcurrency
    config.store.heavyLane.queueLimit = self.heavyQueue
    config.store.heavyLane.budget = queryBudget
    config.store.medianRowsPerPage = self.medianRowsPerPage
    config.store.interactiveLane.width = self.interactiveConcurrency
    config.store.interactiveLane.queueLimit = self.interactiveQueue
    config.store.pointReaderCount = self.pointConnections
    config.store.memory = MemoryBudget(
      megabytes: self.memoryBudgetMb == 0 ? nil : self.memoryBudgetMb
    )
    config.store.changeLogRetention = ChangeLogRetention(
      maximumAge: changeLogAge,
      maximumRows: self.changeLogMaxRows
    )
    if let url = self.postgres {
      var postgres = PostgresConfiguration(url: try PostgresURL(url))
      postgres.standbys = try self.postgresRead.map {
        try PostgresURL($0, option: "--postgres-read")
      }
      postgres.standbyMaximumLag =
        self.postgresReadMaxLag == 0 ? nil : .seconds(self.postgresReadMaxLag)
      postgres.schema = self.postgresSchema
      postgres.maximumConnections = self.postgresConnections
      postgres.pointReads = self.postgresPointReads
      postgres.heavyReads = self.heavyConcurrency
      postgres.heavyQueueLimit = self.heavyQueue
      postgres.pictures = config.store.pictures
      postgres.bulkChunkRows = self.bulkChunkRows
      postgres.maximumWriteBatch = self.maxWriteBatch
      postgres.statementTimeout = queryBudget
      postgres.changeLogMaximumAge = changeLogAge
      postgres.changeLogMaximumRows = self.changeLogMaxRows
      postgres.medianRowsPerPage = config.store.medianRowsPerPage
      config.postgres = postgres
    }
    return config
  }

  /// The OTLP exporter of spans, when `--otlp-endpoint` or OpenTelemetry's own variables
  /// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`) name a collector.
  func tracingBackend() throws -> (tracer: any Tracer, service: any Service, endpoint: String)? {
    let environment = ProcessInfo.processInfo.environment
    guard
      let endpoint = self.otlpEndpoint ?? environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        ?? environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
    else { return nil }
    var configuration = OTel.Configuration.default
    configuration.serviceName = "roster"
    configuration.metrics.enabled = false
    configuration.logs.enabled = false
    configuration.traces.exporter = .otlp
    configuration.traces.otlpExporter.protocol = .grpc
    configuration.traces.otlpExporter.endpoint = endpoint
    do {
      let backend = try OTel.makeTracingBackend(configuration: configuration)
      return (backend.factory, backend.service, endpoint)
    } catch {
      throw ValidationError("--otlp-endpoint \(endpoint): \(error)")
    }
  }

  /// The per-caller rates the flags describe: every caller's (nil for none), and by role.
  func callerRates() throws -> (CallerRate?, [Role: CallerRate]) {
    var byRole: [Role: CallerRate] = [:]
    for entry in self.callerRateFor {
      guard let equals = entry.firstIndex(of: "="),
        let role = Role(name: String(entry[..<equals])),
        let rate = Int(entry[entry.index(after: equals)...]), rate > 0
      else {
        throw ValidationError(
          "--caller-rate-for \(entry): expected ROLE=RATE, ROLE reader, hr, writer or admin, RATE above 0"
        )
      }
      byRole[role] = CallerRate(perSecond: Double(rate))
    }
    let burst = self.callerBurst > 0 ? Double(self.callerBurst) : nil
    let rate =
      self.callerRate > 0 ? CallerRate(perSecond: Double(self.callerRate), burst: burst) : nil
    // A role's rate without an every-caller rate limits that role alone.
    return (rate, byRole)
  }
}
