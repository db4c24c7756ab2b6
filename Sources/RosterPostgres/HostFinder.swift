internal import Logging
internal import PostgresNIO
internal import RosterDomain

/// Finds, among the hosts of the address, the first that suits its `target_session_attrs`,
/// as libpq does: in order, skipping a host that does not answer and, for `read-write` or
/// `primary`, one that is a standby (or takes only read-only transactions).
struct HostFinder {
  var configuration: PostgresConfiguration
  var logger: Logger

  /// A connection of its own (outside any pool) to the first host that suits, and which host
  /// that is. Tries every host up to `attempts` times, half a second apart, while none suits
  /// or answers (a server starting, a standby being promoted).
  ///
  /// - Throws: `unavailable` when no host suited in time; a TLS failure at once.
  func connect(
    attempts: Int
  ) async throws -> (
    connection: PostgresConnection, endpoint: PostgresURL.Endpoint
  ) {
    let url = self.configuration.url
    var attempt = 0
    while true {
      attempt += 1
      var failures: [String] = []
      for endpoint in url.hosts {
        do {
          let connection = try await self.connect(to: url.at(endpoint))
          if let refusal = await self.refusal(of: connection) {
            try? await connection.close()
            failures.append("\(endpoint): \(refusal)")
            continue
          }
          return (connection, endpoint)
        } catch {
          // Stopped (the listener's reconnection when the store closes): nothing to report.
          if Task.isCancelled { throw CancellationError() }
          // A TLS failure, or any but an unreachable server, does not pass with time: say so
          // at once.
          let tlsFailure = url.at(endpoint).tlsFailure(error)
          let mapped = tlsFailure ?? PostgresStore.mapped(error)
          guard tlsFailure == nil, (mapped as? StoreError)?.code == .unavailable else {
            self.logger.error(
              "cannot connect to PostgreSQL",
              metadata: ["url": "\(url.at(endpoint))", "error": "\(String(reflecting: error))"]
            )
            throw mapped
          }
          failures.append("\(endpoint): \(mapped)")
        }
      }
      guard attempt < attempts else {
        // Once per search when it tries again by itself (`HostPool`), every half second.
        self.logger.log(
          level: attempts > 1 ? .error : .debug,
          "no PostgreSQL host suits",
          metadata: [
            "url": "\(url)", "target_session_attrs": "\(url.targetSessionAttributes.rawValue)",
            "hosts": "\(failures.joined(separator: "; "))",
          ]
        )
        throw url.hosts.count > 1
          ? StoreError(
            .unavailable,
            "no database host is \(url.targetSessionAttributes == .any ? "reachable" : "a primary"); try again"
          ) : PostgresStore.unreachable
      }
      try await Task.sleep(for: .milliseconds(500))
    }
  }

  /// Whether `endpoint` accepts a connection now (one of its own, closed at once).
  func answers(_ endpoint: PostgresURL.Endpoint) async -> Bool {
    guard let connection = try? await self.connect(to: self.configuration.url.at(endpoint)) else {
      return false
    }
    try? await connection.close()
    return true
  }

  private func connect(to url: PostgresURL) async throws -> PostgresConnection {
    var connection = PostgresConnection.Configuration(
      host: url.host,
      port: url.port,
      username: url.username,
      password: url.password,
      database: url.database,
      tls: try url.connectionTLS()
    )
    connection.options.additionalStartupParameters = PostgresStore.sessionParameters(
      self.configuration
    )
    return try await PostgresConnection.connect(
      configuration: connection,
      id: 0,
      logger: self.logger
    )
  }

  /// Why `connection`'s server does not suit the address's target; nil when it does.
  private func refusal(of connection: PostgresConnection) async -> String? {
    let target = self.configuration.url.targetSessionAttributes
    if target == .any { return nil }
    do {
      let rows = try await connection.query(
        "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')",
        logger: self.logger
      ).collect()
      guard let row = rows.first else { return "no answer" }
      let (recovery, readOnly) = try row.decode((Bool, String).self)
      if recovery { return "a standby" }
      if target == .readWrite && readOnly == "on" { return "read-only" }
      return nil
    } catch {
      return "\(PostgresStore.mapped(error))"
    }
  }
}
