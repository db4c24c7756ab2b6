import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterProto
import TestSupport
import Testing

/// A client that cancels a `StreamEmployees` makes the server stop reading: the rows it has
/// read (`roster_streamed_rows_total`) stop growing, far short of the table.
///
/// `ROSTER_CANCEL_EMPLOYEES` sets the table's size (20,000 by default, so the suite stays
/// quick; `ROSTER_CANCEL_EMPLOYEES=1000000` for the full-size check).
@Suite("Cancellation, end to end", .timeLimit(.minutes(10)))
struct CancellationTests {
  static let employees =
    Int(ProcessInfo.processInfo.environment["ROSTER_CANCEL_EMPLOYEES"] ?? "") ?? 20_000

  @Test("a cancelled StreamEmployees stops the server's reads at once")
  func cancelledStreamStopsReading() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let server = try await RosterProcess.serve(
      arguments: [
        "--db", directory + "/cancel.sqlite", "--seed-employees", "\(Self.employees)",
        "--no-seed-pictures",
        "--seed-sales-per-employee", "0", "--metrics-port", "0", "--no-log-requests",
      ],
      timeout: .seconds(1800)
    )
    defer { server.terminate() }

    // A small flow-control window, so the server can run only a little ahead of the client.
    var config = HTTP2ClientTransport.Posix.Config.defaults
    config.http2.targetWindowSize = 65_535
    let firstPage = try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: server.port),
        transportSecurity: .plaintext,
        config: config
      )
    ) { client in
      try await Roster_V1_Directory.Client(wrapping: client).streamEmployees(
        .with { $0.pageSize = 100 }
      ) { response in
        for try await page in response.messages { return page.employees.count }
        return 0
      }
    }
    #expect(firstPage == 100)
    // The client is gone: what the server read must stop growing, far short of the table.
    try await Task.sleep(for: .milliseconds(500))
    let afterCancel = try await server.metric("roster_streamed_rows_total")
    try await Task.sleep(for: .seconds(1))
    let later = try await server.metric("roster_streamed_rows_total")
    print(
      "CancellationTests: the server read \(Int(afterCancel)) of \(Self.employees) rows, then stopped"
    )
    #expect(later == afterCancel, "still reading after the cancel: \(afterCancel) then \(later)")
    #expect(
      afterCancel < Double(Self.employees) / 4,
      "read \(afterCancel) of \(Self.employees) rows"
    )
  }
}
