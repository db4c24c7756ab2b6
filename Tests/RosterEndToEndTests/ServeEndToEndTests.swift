import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterDomain
import RosterProto
import RosterSQLite
import RosterSeed
import TestSupport
import Testing

@Suite("roster serve, end to end", .timeLimit(.minutes(10)))
struct ServeEndToEndTests {
  @Test("the built binary seeds on first start, answers over loopback, and exits 0 on SIGTERM")
  func serveOverLoopback() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let server = try await RosterProcess.serve(
      arguments: ["--db", directory + "/e2e.sqlite", "--seed-employees", "120"]
    )
    #expect(server.address.hasPrefix("127.0.0.1:"))
    #expect(server.port > 0)

    try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: server.port),
        transportSecurity: .plaintext
      )
    ) { client in
      let directory = Roster_V1_Directory.Client(wrapping: client)
      #expect(try await directory.countEmployees(.init()).count == 120)

      let page = try await directory.listEmployees(.with { $0.pageSize = 10 })
      #expect(page.employees.count == 10)
      #expect(!page.nextPageToken.isEmpty)

      let first = try #require(page.employees.first)
      let fetched = try await directory.getEmployee(.with { $0.guid = first.guid })
      #expect(fetched == first)

      let batch = try await directory.batchGetEmployees(
        .with { $0.guids = page.employees.map(\.guid).reversed() }
      )
      #expect(batch.employees.map(\.guid) == page.employees.map(\.guid).reversed())

      let streamed = try await directory.streamEmployees(.with { $0.pageSize = 50 }) { response in
        var count = 0
        for try await page in response.messages { count += page.employees.count }
        return count
      }
      #expect(streamed == 120)

      // The demo database has sales: exactly the ones DemoSales makes for these employees.
      let demoSales = Array(DemoSales(employees: DemoData(count: 120), perEmployee: 20))
      let analytics = Roster_V1_Analytics.Client(wrapping: client)
      let count = try await analytics.aggregateSales(.with { $0.function = .count })
      #expect(count.groups.map(\.value) == [Double(demoSales.count)])
      let sales = try await analytics.employeeSales(.with { $0.guid = first.guid })
      #expect(Int(sales.count) == demoSales.filter { $0.employeeGUID == first.guid }.count)
      let headcounts = try await analytics.departmentHeadcounts(.init())
      #expect(headcounts.departments.map(\.headcount).reduce(0, +) == 120)

      let health = Grpc_Health_V1_Health.Client(wrapping: client)
      #expect(try await health.check(.init()).status == .serving)
      #expect(
        try await health.check(.with { $0.service = "roster.v1.Analytics" }).status == .serving
      )
    }
    #expect(server.terminate() == 0)
  }

  @Test("without a tokens file, a non-loopback bind is refused unless --insecure, which warns")
  func insecureBind() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    func run(_ extra: [String]) async throws -> (Int32, String) {
      try await RosterProcess.offPool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: RosterProcess.binaryPath)
        process.arguments =
          [
            "serve", "--host", "0.0.0.0", "--port", "0", "--db", directory + "/x.sqlite",
            "--seed-employees", "0",
          ] + extra
        let errors = Pipe()
        let output = Pipe()
        process.standardError = errors
        process.standardOutput = output
        try process.run()
        if extra.contains("--insecure") {
          // A served bind runs until stopped. The warning is written before the server starts,
          // so once it says where it listens (however long a loaded machine takes), stop it.
          var said = Data()
          while !String(decoding: said, as: UTF8.self).contains("listening on") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            said.append(chunk)
          }
          process.terminate()
        }
        let text = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: text, as: UTF8.self))
      }
    }
    let (refused, message) = try await run([])
    #expect(refused != 0)
    #expect(message.contains("refusing to serve 0.0.0.0 without --tokens"))
    #expect(!FileManager.default.fileExists(atPath: directory + "/x.sqlite"))
    let (_, warning) = try await run(["--insecure"])
    #expect(warning.contains("WARNING: --insecure"))
  }

  @Test("a restart keeps the data and does not seed again")
  func restartKeepsData() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let arguments = ["--db", directory + "/again.sqlite", "--seed-employees", "30"]
    for _ in 0 ..< 2 {
      let server = try await RosterProcess.serve(arguments: arguments)
      let count = try await withGRPCClient(
        transport: .http2NIOPosix(
          target: .ipv4(address: "127.0.0.1", port: server.port),
          transportSecurity: .plaintext
        )
      ) { client in
        try await Roster_V1_Directory.Client(wrapping: client).countEmployees(.init()).count
      }
      #expect(count == 30)
      #expect(server.terminate() == 0)
    }
  }
}
