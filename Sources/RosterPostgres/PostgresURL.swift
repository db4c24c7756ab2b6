public import Foundation
public import RosterDomain

/// A parsed `postgres://` address: one host, or several as libpq takes them, with the kind of
/// server to use among them (`target_session_attrs`).
public struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
  /// The host this address connects to: the first of `hosts`, or the one `at(_:)` chose.
  public var host: String
  public var port: Int
  /// Every host the address names, in order (libpq tries them in this order too).
  public var hosts: [Endpoint]
  public var username: String
  public var password: String?
  public var database: String
  /// Which of `hosts` to use: any that answers, or only the primary (`read-write`).
  public var targetSessionAttributes: TargetSessionAttributes = .any
  /// TLS to the server, as libpq's `sslmode`: default `prefer`.
  public var sslMode: SSLMode = .prefer
  /// The CA certificates (PEM) that `verify-ca` and `verify-full` trust, as libpq's
  /// `sslrootcert`; `system` for the system's store. Without it, libpq's default file
  /// (`~/.postgresql/root.crt`).
  public var sslRootCert: String?
  /// The name each session gives PostgreSQL, as libpq's `application_name`: what
  /// `pg_stat_activity` shows, to tell Roster's sessions (or one replica's) from others.
  public var applicationName = "roster"

  /// One `HOST[:PORT]` of the address.
  public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
      self.host = host
      self.port = port
    }

    public var description: String {
      self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }
  }

  /// libpq's `target_session_attrs` values Roster takes.
  public enum TargetSessionAttributes: String, Sendable, Hashable, CaseIterable {
    /// The first host that accepts a connection.
    case any
    /// The first host that takes writes: a primary, not a hot standby or a server set to
    /// read-only transactions.
    case readWrite = "read-write"
    /// The first host not in recovery (libpq's `primary`).
    case primary
  }

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

  /// Parses `postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]...]/DATABASE[?PARAMETERS]`
  /// (or `postgresql://`), where the parameters are `sslmode`, `sslrootcert`,
  /// `target_session_attrs` and `application_name`; others are refused, so a typo is not
  /// silently ignored.
  ///
  /// - Throws: `invalidArgument` naming what is missing or wrong, and `option`, where the
  ///   address came from.
  public init(_ text: String, option: String = "--postgres") throws {
    // URLComponents takes one host: the list is read here, and the address parsed with its
    // first host in its place.
    let (single, hostList) = Self.splittingHosts(text)
    let notURL = StoreError(
      .invalidArgument,
      "\(option) '\(Self.redacted(text))' is not a postgres:// URL"
    )
    guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else { throw notURL }
    self.hosts = try hostList.map { try Self.endpoint($0, option: option) }
    guard let components = URLComponents(string: single) else { throw notURL }
    guard let user = components.user, !user.isEmpty else {
      throw StoreError(.invalidArgument, "\(option) names no user")
    }
    guard let first = self.hosts.first else {
      throw StoreError(.invalidArgument, "\(option) names no host")
    }
    (self.host, self.port) = (first.host, first.port)
    let database = String(components.path.drop(while: { $0 == "/" }))
    self.username = user.removingPercentEncoding ?? user
    self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
    self.database = database.isEmpty ? self.username : database
    for item in components.queryItems ?? [] {
      try self.read(item, option: option)
    }
  }

  private mutating func read(_ item: URLQueryItem, option: String) throws {
    func choice<Choice: RawRepresentable & CaseIterable>(_: Choice.Type) throws -> Choice
    where Choice.RawValue == String {
      guard let value = Choice(rawValue: item.value ?? "") else {
        let values = Choice.allCases.map(\.rawValue).joined(separator: ", ")
        throw StoreError(
          .invalidArgument,
          "\(option) \(item.name) '\(item.value ?? "")' is not one of \(values)"
        )
      }
      return value
    }
    switch item.name {
    case "sslmode":
      self.sslMode = try choice(SSLMode.self)
    case "target_session_attrs":
      self.targetSessionAttributes = try choice(TargetSessionAttributes.self)
    case "sslrootcert":
      guard let file = item.value, !file.isEmpty else {
        throw StoreError(.invalidArgument, "\(option) sslrootcert names no file")
      }
      self.sslRootCert = file
    case "application_name":
      // PostgreSQL keeps 63 bytes of it and shows other than printable ASCII as '?'.
      guard let name = item.value, (1 ... 63).contains(name.utf8.count),
        name.utf8.allSatisfy({ (0x20 ... 0x7e).contains($0) })
      else {
        throw StoreError(
          .invalidArgument,
          "\(option) application_name must be 1 to 63 printable ASCII characters"
        )
      }
      self.applicationName = name
    default:
      throw StoreError(
        .invalidArgument,
        "\(option) parameter '\(item.name)' is not supported (sslmode, sslrootcert, target_session_attrs and application_name are)"
      )
    }
  }

  /// The same address at `endpoint`, one of `hosts`.
  public func at(_ endpoint: Endpoint) -> PostgresURL {
    var url = self
    (url.host, url.port) = (endpoint.host, endpoint.port)
    return url
  }

  /// The address without its password, for logs.
  public var description: String {
    let hosts =
      self.hosts.count > 1
      ? self.hosts.map(\.description).joined(separator: ",")
      : Endpoint(host: self.host, port: self.port).description
    return "postgres://\(self.username)@\(hosts)/\(self.database)"
  }

  /// `text` with its password, if it has one, as `***`.
  public static func redacted(_ text: String) -> String {
    guard let authority = Self.authority(text), let at = text[authority].lastIndex(of: "@"),
      let colon = text[authority.lowerBound ..< at].firstIndex(of: ":")
    else { return text }
    return String(text[...colon]) + "***" + String(text[at...])
  }

  /// Where `USER[:PASSWORD]@HOSTS` is in `text`: after `://`, up to the path, query or fragment.
  private static func authority(_ text: String) -> Range<String.Index>? {
    guard let schemeEnd = text.range(of: "://") else { return nil }
    let rest = text[schemeEnd.upperBound...]
    let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
    return rest.startIndex ..< end
  }

  /// `text` with only the first of its hosts, and the hosts as written (`HOST[:PORT]` each).
  private static func splittingHosts(_ text: String) -> (single: String, hosts: [String]) {
    guard let authority = Self.authority(text) else { return (text, []) }
    let hostsStart =
      text[authority].lastIndex(of: "@").map { text.index(after: $0) } ?? authority.lowerBound
    let hosts = text[hostsStart ..< authority.upperBound]
      .split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    guard hosts.count > 1 else { return (text, hosts) }
    return (String(text[..<hostsStart]) + hosts[0] + String(text[authority.upperBound...]), hosts)
  }

  /// `HOST[:PORT]` or `[IPV6][:PORT]`, port 5432 unless given.
  private static func endpoint(_ text: String, option: String) throws -> Endpoint {
    let bad = StoreError(
      .invalidArgument,
      "\(option) host \(ClientText.quoted(text)) is not HOST[:PORT]"
    )
    var host = Substring(text)
    var port = 5432
    if host.hasPrefix("[") {
      guard let close = host.firstIndex(of: "]") else { throw bad }
      let after = host[host.index(after: close)...]
      host = host[host.index(after: host.startIndex) ..< close]
      if !after.isEmpty {
        guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { throw bad }
        port = number
      }
    } else if let colon = host.lastIndex(of: ":") {
      guard let number = Int(host[host.index(after: colon)...]) else { throw bad }
      (host, port) = (host[..<colon], number)
    }
    guard !host.isEmpty, (1 ... 65535).contains(port) else {
      throw StoreError(
        .invalidArgument,
        host.isEmpty ? "\(option) names no host" : "\(option) port \(port) is not 1-65535"
      )
    }
    return Endpoint(host: String(host), port: port)
  }
}
