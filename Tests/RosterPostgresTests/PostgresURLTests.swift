import RosterDomain
import Testing

@testable import RosterPostgres

/// `--postgres` addresses as libpq reads them: several hosts, and which of them to use.
@Suite("PostgreSQL addresses")
struct PostgresURLTests {
  @Test("several hosts, each with its port or 5432, and target_session_attrs")
  func severalHosts() throws {
    let url = try PostgresURL(
      "postgres://app:s%40cret@db-a:5433,db-b,[::1]:6000/roster?target_session_attrs=read-write&sslmode=disable"
    )
    #expect(
      url.hosts == [
        .init(host: "db-a", port: 5433), .init(host: "db-b", port: 5432),
        .init(host: "::1", port: 6000),
      ]
    )
    #expect(url.host == "db-a" && url.port == 5433)
    #expect(url.username == "app" && url.password == "s@cret" && url.database == "roster")
    #expect(url.targetSessionAttributes == .readWrite)
    #expect(url.sslMode == .disable)
    #expect(url.description == "postgres://app@db-a:5433,db-b:5432,[::1]:6000/roster")
    let second = url.at(url.hosts[1])
    #expect(second.host == "db-b" && second.port == 5432 && second.hosts == url.hosts)
    #expect(
      PostgresURL.redacted("postgres://app:secret@db-a:5433,db-b/roster")
        == "postgres://app:***@db-a:5433,db-b/roster"
    )
    #expect(
      PostgresURL.redacted("postgres://app:p%40ss@db-a/roster?sslmode=require")
        == "postgres://app:***@db-a/roster?sslmode=require"
    )
    #expect(PostgresURL.redacted("postgres://app@db-a/roster") == "postgres://app@db-a/roster")
  }

  @Test("one host reads as before: any server, port 5432 unless given")
  func oneHost() throws {
    let url = try PostgresURL("postgresql://app@localhost/roster")
    #expect(url.hosts == [.init(host: "localhost", port: 5432)])
    #expect(url.targetSessionAttributes == .any)
    #expect(url.applicationName == "roster")
    #expect(url.description == "postgres://app@localhost:5432/roster")
  }

  @Test("application_name names the sessions")
  func applicationName() throws {
    let url = try PostgresURL("postgres://app@localhost/roster?application_name=roster%20eu-1")
    #expect(url.applicationName == "roster eu-1")
    var configuration = PostgresConfiguration(url: url)
    configuration.schema = "directory"
    let parameters = Dictionary(
      uniqueKeysWithValues: PostgresStore.sessionParameters(configuration)
    )
    #expect(parameters["application_name"] == "roster eu-1")
  }

  @Test(
    "a bad host list or target is refused, naming what is wrong",
    arguments: [
      ("postgres://app@a,/roster", "names no host"),
      ("postgres://app@a:99999/roster", "port 99999"),
      ("postgres://app@a:x,b/roster", "'a:x'"),
      ("postgres://app@[::1/roster", "'[::1'"),
      ("postgres://app@a,b/roster?target_session_attrs=standby", "target_session_attrs 'standby'"),
      ("postgres://app@a,b/roster?target_session=any", "'target_session'"),
      ("postgres://app@a/roster?application_name=", "application_name"),
      ("postgres://app@a/roster?application_name=caf%C3%A9", "application_name"),
    ]
  )
  func refused(text: String, naming: String) {
    #expect {
      _ = try PostgresURL(text)
    } throws: { error in
      guard let error = error as? StoreError else { return false }
      return error.code == .invalidArgument && error.message.contains(naming)
    }
  }
}
