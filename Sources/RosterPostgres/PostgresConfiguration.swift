public import Foundation
public import RosterDomain
public import RosterPictures

/// Where the PostgreSQL backend connects and how it behaves.
public struct PostgresConfiguration: Sendable {
  /// The server, as `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.
  public var url: PostgresURL
  /// The schema holding Roster's tables; several deployments (or tests) can share a database
  /// with a schema each.
  public var schema: String = "roster"
  /// Connections to the server; reads and the writer share them. The pool keeps one open
  /// and opens the others as calls need them (`PostgresStore.clientConfiguration`).
  public var maximumConnections: Int = Self.defaultMaximumConnections
  /// How often every pooled connection runs a trivial statement while the store runs
  /// (`PostgresStore.keepAlive`), so an idle connection keeps its place in firewalls and
  /// NATs, and one that died is found and replaced before a call needs it.
  public var keepAliveInterval: Duration = .seconds(30)
  /// The most writes that share one transaction (group commit).
  public var maximumWriteBatch: Int = 256
  /// Point reads (`GetEmployee`) that run at once, each one statement for every read that
  /// waited for it (`PointReads`). Fewer statements carry more reads each, and each statement
  /// costs the replica the same whatever it carries (TLS, postgres-nio, a round trip); more
  /// let a database with idle cores answer a moderate load sooner. 2 gave the most calls per
  /// second at 64 in flight and lost nothing at 4 (docs/performance.md, "Point reads two at a
  /// time").
  public var pointReads: Int = Self.defaultPointReads
  /// Rows per transaction of a bulk upsert.
  public var bulkChunkRows: Int = 2_000
  /// The longest one query may run before the server stops it; nil for no limit.
  public var statementTimeout: Duration? = .seconds(30)
  /// Heavy reads (counts, aggregates over raw sales, a month of days, name searches) that
  /// run at once, each on a connection; the rest of the pool stays for point reads and the
  /// writer.
  public var heavyReads: Int = 4
  /// Heavy reads that may wait for a place; one more is refused with RESOURCE_EXHAUSTED.
  public var heavyQueueLimit: Int = 16
  /// The sales a page of medians by year, month or day reads at most (at least one group):
  /// as on SQLite, it ends at a group boundary once its groups hold this many.
  public var medianRowsPerPage: Int64 = 500_000
  /// How much history the change log keeps.
  public var changeLogMaximumAge: Duration = .seconds(7 * 24 * 3600)
  /// The most changes the change log keeps.
  public var changeLogMaximumRows: Int = 2_000_000
  /// How often the change log is pruned and unreferenced pictures are removed.
  public var maintenanceInterval: Duration = .seconds(60)
  /// How often the newest change is read even without a notification: the bound on how late
  /// a watcher hears of a change whose notification was lost (a reconnect).
  public var feedPollInterval: Duration = .seconds(1)
  /// Picture limits and thumbnail settings. Pictures live in the database (chunked rows), so
  /// every replica serves every picture; `directory` only holds uploads in progress.
  public var pictures: PictureConfiguration = PictureConfiguration()
  /// Bytes per stored picture chunk.
  public var pictureChunkBytes: Int = 256 * 1024
  /// Where uploads in progress are staged (local to this replica).
  public var scratchDirectory: String = FileManager.default.temporaryDirectory
    .appendingPathComponent("roster-uploads").path

  /// `maximumConnections` unless set: `roster serve --postgres-connections` shows it.
  public static let defaultMaximumConnections = 16
  /// `pointReads` unless set: `roster serve --postgres-point-reads` shows it.
  public static let defaultPointReads = 2

  /// A configuration for the server at `url`.
  public init(url: PostgresURL) {
    self.url = url
  }
}

/// A parsed `postgres://` address.
public struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
  public var host: String
  public var port: Int
  public var username: String
  public var password: String?
  public var database: String
  /// TLS to the server, as libpq's `sslmode`: default `prefer`.
  public var sslMode: SSLMode = .prefer
  /// The CA certificates (PEM) that `verify-ca` and `verify-full` trust, as libpq's
  /// `sslrootcert`; `system` for the system's store. Without it, libpq's default file
  /// (`~/.postgresql/root.crt`).
  public var sslRootCert: String?

  /// libpq's `sslmode` values.
  public enum SSLMode: String, Sendable, Hashable, CaseIterable {
    /// Plaintext only.
    case disable
    /// TLS if the server offers it; plaintext otherwise (as `prefer`: postgres-nio has no
    /// plaintext-first attempt).
    case allow
    /// TLS if the server offers it, plaintext otherwise; no certificate check.
    case prefer
    /// TLS or no connection; the certificate is checked against `sslrootcert` only when one is
    /// given (libpq: "require" with a root certificate behaves as "verify-ca").
    case require
    /// TLS, and the server's certificate must chain to `sslrootcert`.
    case verifyCA = "verify-ca"
    /// As `verify-ca`, and the certificate must name the host.
    case verifyFull = "verify-full"
  }

  /// Parses `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE&sslrootcert=FILE]`
  /// (or `postgresql://`); other parameters are refused, so a typo is not silently ignored.
  ///
  /// - Throws: `invalidArgument` naming what is missing or wrong.
  public init(_ text: String) throws {
    guard let components = URLComponents(string: text),
      ["postgres", "postgresql"].contains(components.scheme ?? "")
    else {
      throw StoreError(
        .invalidArgument,
        "--postgres '\(Self.redacted(text))' is not a postgres:// URL"
      )
    }
    guard let host = components.host, !host.isEmpty else {
      throw StoreError(.invalidArgument, "--postgres names no host")
    }
    guard let user = components.user, !user.isEmpty else {
      throw StoreError(.invalidArgument, "--postgres names no user")
    }
    let database = String(components.path.drop(while: { $0 == "/" }))
    self.host = host
    self.port = components.port ?? 5432
    self.username = user.removingPercentEncoding ?? user
    self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
    self.database = database.isEmpty ? self.username : database
    for item in components.queryItems ?? [] {
      switch item.name {
      case "sslmode":
        guard let mode = SSLMode(rawValue: item.value ?? "") else {
          let modes = SSLMode.allCases.map(\.rawValue).joined(separator: ", ")
          throw StoreError(
            .invalidArgument,
            "--postgres sslmode '\(item.value ?? "")' is not one of \(modes)"
          )
        }
        self.sslMode = mode
      case "sslrootcert":
        guard let file = item.value, !file.isEmpty else {
          throw StoreError(.invalidArgument, "--postgres sslrootcert names no file")
        }
        self.sslRootCert = file
      default:
        throw StoreError(
          .invalidArgument,
          "--postgres parameter '\(item.name)' is not supported (sslmode and sslrootcert are)"
        )
      }
    }
  }

  /// The address without its password, for logs.
  public var description: String {
    "postgres://\(self.username)@\(self.host):\(self.port)/\(self.database)"
  }

  public static func redacted(_ text: String) -> String {
    guard var components = URLComponents(string: text), components.password != nil else {
      return text
    }
    components.password = "***"
    return components.string ?? text
  }
}
