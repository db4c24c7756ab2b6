import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterProto
import TestSupport
import Testing

/// `roster serve` gives back the code only starting up touched (`StartupPages`), and keeps
/// working: what it runs afterwards maps back in.
@Suite("Startup pages", .timeLimit(.minutes(10)))
struct StartupPagesTests {
  @Test(
    "once listening, file-backed memory falls well below what starting up left resident, and every kind of call still works"
  )
  func releasedAndStillServing() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let log = directory + "/serve.log"
    let released = try await RosterProcess.serve(
      arguments: ["--db", directory + "/pages.sqlite", "--seed-employees", "200"],
      launcher: ["/bin/sh", "-c", "exec \"$@\" 2>\"$0\"", log]
    )
    // The server logs the release, with its RssFile just before it, once the release is done:
    // waited for (under load it can come well after "listening"), then RssFile read.
    let line = try #require(try await Self.releaseLine(in: log))
    let releasedFile = try Self.fileBacked(released.processIdentifier)
    let before = try #require(
      line.split(separator: " ").first { $0.hasPrefix("rss_file_kib_before=") }.flatMap {
        Int($0.dropFirst("rss_file_kib_before=".count))
      }
    )
    #expect(
      releasedFile < before * 6 / 10,
      "RssFile \(releasedFile) kB released, \(before) kB before: \(line)"
    )

    try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: released.port),
        transportSecurity: .plaintext
      )
    ) { client in
      let directory = Roster_V1_Directory.Client(wrapping: client)
      let page = try await directory.listEmployees(.with { $0.pageSize = 20 })
      #expect(page.employees.count == 20)
      let first = try #require(page.employees.first)
      #expect(try await directory.getEmployee(.with { $0.guid = first.guid }) == first)
      let created = try await directory.createEmployee(
        .with {
          $0.employee = .with {
            $0.name = "Paged In"
            $0.department = "Engineering"
            $0.startDate = "2024-02-29"
          }
        }
      )
      #expect(created.name == "Paged In")
      let streamed = try await directory.streamEmployees(.with { $0.pageSize = 64 }) { response in
        var count = 0
        for try await page in response.messages { count += page.employees.count }
        return count
      }
      #expect(streamed == 201)
      let headcounts = try await Roster_V1_Analytics.Client(wrapping: client).departmentHeadcounts(
        .init()
      )
      #expect(headcounts.departments.map(\.headcount).reduce(0, +) == 201)
      let health = Grpc_Health_V1_Health.Client(wrapping: client)
      #expect(try await health.check(.init()).status == .serving)
    }
    // A clean exit: no page it needed was lost.
    #expect(released.terminate() == 0)
  }

  /// `RssFile` of process `pid` in kB, half a second after it started listening (the release
  /// runs right after the "listening on" line).
  /// The log's "released startup pages" line, polled for up to a minute (a bound that only
  /// catches a server that never releases).
  private static func releaseLine(in log: String) async throws -> Substring? {
    for _ in 0 ..< 600 {
      let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
      if let line = text.split(separator: "\n").first(where: {
        $0.contains("released startup pages")
      }) {
        return line
      }
      try await Task.sleep(for: .milliseconds(100))
    }
    return nil
  }

  private static func fileBacked(_ pid: Int32) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("RssFile:") })
    return try #require(line.split(separator: " ").dropFirst().first.flatMap { Int($0) })
  }
}
