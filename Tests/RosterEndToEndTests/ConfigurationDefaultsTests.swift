import Foundation
import RosterDomain
import RosterPostgres
import RosterSQLite
import RosterServer
import Testing

@testable import roster

/// The defaults live in the configuration types (`ServerConfig`, `StoreConfiguration`); the
/// `roster serve` flags are made from them and docs/operations.md lists them. These tests
/// fail when any of the three disagree.
@Suite("Configuration defaults", .timeLimit(.minutes(10)))
struct ConfigurationDefaultsTests {
  /// Every setting of a configuration, as text.
  static func settings(_ config: ServerConfig) -> [String: String] {
    let store = config.store
    let limits = config.limits
    return [
      "host": config.host, "port": "\(config.port)", "logRequests": "\(config.logRequests)",
      "seedEmployees": "\(config.seedEmployees)", "seedPictures": "\(config.seedPictures)",
      "seedSalesPerEmployee": "\(config.seedSalesPerEmployee)",
      "shutdownGrace": "\(config.shutdownGrace)",
      "maxRequestBytes": "\(limits.maxRequestBytes)",
      "maxConcurrentStreams": "\(limits.maxConcurrentStreams)",
      "keepaliveInterval": "\(limits.keepaliveInterval)",
      "keepaliveTimeout": "\(limits.keepaliveTimeout)",
      "maxConnectionIdle": "\(String(describing: limits.maxConnectionIdle))",
      "maxConnectionAge": "\(String(describing: limits.maxConnectionAge))",
      "defaultDeadline": "\(String(describing: limits.defaultDeadline))",
      "maxStreamsPerClient": "\(limits.maxStreamsPerClient)",
      "cors": "\(String(describing: config.cors))",
      "path": store.path, "cacheSizeKiB": "\(store.cacheSizeKiB)", "mmapSize": "\(store.mmapSize)",
      "sqlDebug": "\(store.sqlDebug)", "synchronous": store.synchronous.rawValue,
      "window": "\(store.writer.window)",
      "maximumBatch": "\(store.writer.maximumBatch)",
      "bulkChunkRows": "\(store.writer.bulkChunkRows)",
      "bulkNiceness": "\(store.writer.bulkNiceness)", "heavyLane": "\(store.heavyLane)",
      "interactiveLane": "\(store.interactiveLane)",
      "medianRowsPerPage": "\(store.medianRowsPerPage)",
      "pointReaderCount": "\(store.pointReaderCount)",
      "memory": "\(store.memory)",
      "changeLogMaxAge": "\(store.changeLogRetention.maximumAge)",
      "changeLogMaxRows": "\(store.changeLogRetention.maximumRows)",
      "pictureMaximumBytes": "\(store.pictures.maximumBytes)",
      "pictureCacheBytes": "\(store.pictures.cacheBytes)",
      "inlineMaximumBytes": "\(store.pictures.inlineMaximumBytes)",
    ]
  }

  @Test("roster serve with no flags configures exactly the configuration types' defaults")
  func flagsComeFromTheConfiguration() throws {
    let environment = ProcessInfo.processInfo.environment
    try #require(
      environment["ROSTER_HOST"] == nil && environment["ROSTER_PORT"] == nil
        && environment["ROSTER_DB"] == nil
    )
    let fromFlags = Self.settings(try Serve.parse([]).serverConfig())
    let defaults = Self.settings(ServerConfig())
    for key in defaults.keys.sorted() {
      #expect(
        fromFlags[key] == defaults[key],
        "\(key): flags give \(fromFlags[key] ?? "nothing"), the configuration \(defaults[key] ?? "nothing")"
      )
    }
  }

  /// `--flag` → the default `roster serve --help` shows ("on"/"off" for on/off flags), for
  /// every flag; nil where it shows none.
  static func helpDefaults() -> [String: String?] {
    // One entry per option: its line, and the description when help puts it on the next.
    var entries: [String] = []
    for line in Serve.helpMessage(columns: 10_000).split(separator: "\n") {
      let text = line.trimmingCharacters(in: .whitespaces)
      if text.hasPrefix("--") {
        entries.append(text)
      } else if !entries.isEmpty, !text.isEmpty, line.hasPrefix("   ") {
        entries[entries.count - 1] += " " + text
      }
    }
    var defaults: [String: String?] = [:]
    for text in entries {
      guard let name = text.split(separator: " ").first else { continue }
      let flags = name.split(separator: "/").map(String.init)
      if flags[0] == "--help" { continue }
      var value: String?
      if let range = text.range(of: "(default: ", options: .backwards), text.hasSuffix(")") {
        value = String(text[range.upperBound ..< text.index(before: text.endIndex)])
        if flags.count == 2 { value = value == flags[0] ? "on" : "off" }
      } else if !text.contains("<") {
        value = "off"  // a flag with no value is off unless given
      }
      defaults[flags[0]] = value
    }
    return defaults
  }

  /// docs/operations.md's configuration table: `--flag` → its default column, one entry per
  /// flag of rows that list several.
  static func documentedDefaults() throws -> [String: String] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(
      contentsOf: root.appendingPathComponent("docs/operations.md"),
      encoding: .utf8
    )
    let section = try #require(text.components(separatedBy: "## Configuration").dropFirst().first)
    var documented: [String: String] = [:]
    for line in section.split(separator: "\n") where line.hasPrefix("| `--") {
      let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
        $0.trimmingCharacters(in: .whitespaces)
      }
      let flags = cells[1].components(separatedBy: ", ").map {
        $0.replacingOccurrences(of: "`", with: "").components(separatedBy: " / ")[0]
      }
      let values = cells[3].components(separatedBy: ", ").map {
        $0.replacingOccurrences(of: "`", with: "")
      }
      for (index, flag) in flags.enumerated() {
        documented[flag] = values.count == flags.count ? values[index] : values[0]
      }
    }
    return documented
  }

  @Test(
    "--postgres-connections, --postgres-point-reads and the heavy reads' flags reach the PostgreSQL configuration, and a width outside 1 to the connections is refused"
  )
  func postgresWidths() throws {
    let url = ["--postgres", "postgres://roster@db.example/roster"]
    let defaults = try #require(try Serve.parse(url).serverConfig().postgres)
    #expect(defaults.maximumConnections == PostgresConfiguration.defaultMaximumConnections)
    #expect(defaults.pointReads == PostgresConfiguration.defaultPointReads)
    #expect(defaults.heavyReads == HeavyReadDefaults.width)
    #expect(defaults.heavyQueueLimit == HeavyReadDefaults.queueLimit)
    let set = try #require(
      try Serve.parse(
        url + [
          "--postgres-connections", "8", "--postgres-point-reads", "3", "--heavy-concurrency", "5",
          "--heavy-queue", "7",
        ]
      ).serverConfig().postgres
    )
    #expect(set.maximumConnections == 8 && set.pointReads == 3)
    #expect(set.heavyReads == 5 && set.heavyQueueLimit == 7)
    for refused in [
      ["--postgres-point-reads", "0"],
      ["--postgres-connections", "4", "--postgres-point-reads", "5"],
      ["--postgres-connections", "0"],
    ] {
      #expect(throws: (any Error).self, "\(refused)") { try Serve.parse(url + refused) }
    }
  }

  @Test("docs/operations.md lists every roster serve flag with the default the flag has")
  func documentationMatchesTheFlags() throws {
    let help = Self.helpDefaults()
    let documented = try Self.documentedDefaults()
    #expect(help.count > 40, "the help lists \(help.count) flags")
    for (flag, value) in help.sorted(by: { $0.key < $1.key }) {
      guard let written = documented[flag] else {
        Issue.record("\(flag) is missing from docs/operations.md")
        continue
      }
      if let value {
        #expect(written == value, "\(flag): docs say \(written), the flag defaults to \(value)")
      }
    }
    for flag in documented.keys where help[flag] == nil {
      Issue.record("docs/operations.md lists \(flag), which roster serve does not have")
    }
    // Options whose help shows no default, against the configuration itself.
    let config = ServerConfig()
    #expect(documented["--synchronous"] == config.store.synchronous.rawValue)
  }
}
