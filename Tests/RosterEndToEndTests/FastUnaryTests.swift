import Foundation
import GRDB
import GRPCCore
import RosterProto
import SwiftProtobuf
import TestSupport
import Testing

@testable import RosterServices

/// The unary fast path (`UnaryFastPath`) answers as grpc-swift's server does.
///
/// `roster serve` and grpc-swift's own server over the same services (`GRPCSwiftReference`, in
/// this process), over one database and one tokens file. `RosterTransportTests` sends each
/// request of the table (`FastUnaryTests+Cases`) to both; these tests check what the table does
/// not: headers that end the stream, the request metrics, a passed deadline, a write's author.
@Suite("Unary fast path, end to end", .timeLimit(.minutes(10)), .serialized)
final class FastUnaryTests {
  let directory: String
  let fast: RosterProcess
  let reference: GRPCSwiftReference
  let reader: String
  let writer: String
  /// One employee's guid, for reads that succeed.
  let guid: String

  init() async throws {
    self.directory = try makeTemporaryDirectory()
    let setup = try await Self.servers(in: self.directory, database: "fast.sqlite")
    self.reader = setup.reader
    self.writer = setup.writer
    let common = setup.arguments
    self.fast = try await RosterProcess.serve(arguments: common)
    self.reference = try await GRPCSwiftReference.start(
      database: self.directory + "/fast.sqlite",
      tokensFile: self.directory + "/tokens",
      maxRequestBytes: Self.maxRequestBytes,
      defaultDeadline: .milliseconds(Self.defaultDeadlineMs)
    )
    let page = try await rawHTTP2Call(
      port: self.fast.port,
      headers: Self.headers("/roster.v1.Directory/ListEmployees", token: self.reader),
      body: grpcFramed(
        try Roster_V1_ListEmployeesRequest.with { $0.pageSize = 1 }.serializedBytes()
      )
    )
    let listed = try Roster_V1_ListEmployeesResponse(serializedBytes: Array(page.body.dropFirst(5)))
    self.guid = try #require(listed.employees.first?.guid)
  }

  deinit {
    _ = self.fast.terminate()
    self.reference.stop()
    try? FileManager.default.removeItem(atPath: self.directory)
  }

  /// The request limit of the servers `servers(in:database:)` starts, and of the reference.
  static let maxRequestBytes = 512 * 1024
  /// Their default deadline. grpc-swift keeps a unary call whose headers end the stream, and
  /// that brings no deadline, open until the server's default deadline ("a call whose headers
  /// end the stream"): 4 s keeps that test short and still far from "at once" on a loaded
  /// machine.
  static let defaultDeadlineMs = 4_000

  /// A reader's and a writer's token, in a tokens file in `directory`, and the `roster serve`
  /// arguments the servers that compare replies share (one database in `directory`), with
  /// `defaultDeadlineMs` as `--default-deadline-ms` (0 for none).
  static func servers(
    in directory: String,
    database: String,
    defaultDeadlineMs: Int = FastUnaryTests.defaultDeadlineMs
  ) async throws -> (reader: String, writer: String, arguments: [String]) {
    let reader = try await RosterProcess.run(["token", "--role", "reader"]).output.split(
      separator: "\n"
    )
    let writer = try await RosterProcess.run(["token", "--role", "writer"]).output.split(
      separator: "\n"
    )
    try "\(reader[1])\n\(writer[1])\n".write(
      toFile: directory + "/tokens",
      atomically: true,
      encoding: .utf8
    )
    let arguments = [
      "--db", directory + "/" + database, "--tokens", directory + "/tokens",
      "--seed-employees", "50", "--no-seed-pictures", "--seed-sales-per-employee", "0",
      "--metrics-port", "0", "--no-log-requests", "--max-request-kib",
      "\(Self.maxRequestBytes / 1024)",
      "--default-deadline-ms", "\(defaultDeadlineMs)",
    ]
    return (String(reader[0]), String(writer[0]), arguments)
  }

  /// What a gRPC client sends: pseudo-headers first, then content type, `te`, the token.
  static func headers(
    _ path: String,
    token: String?,
    extra: [(String, String)] = []
  ) -> [(String, String)] {
    var headers = [
      (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
      ("content-type", "application/grpc"), ("te", "trailers"),
    ]
    if let token { headers.append(("authorization", "Bearer \(token)")) }
    return headers + extra
  }

  /// One request of the table: what is sent, and which path the fast server should take.
  struct Case: CustomStringConvertible, Sendable {
    var name: String
    var headers: [(String, String)]
    var body: [UInt8]?
    var fast: Bool
    var description: String { self.name }
  }

  func cases() throws -> [Case] {
    try Self.cases(guid: self.guid, reader: self.reader)
  }

  /// `roster_unary_fast_path_total` by path ("fast", "grpc_swift") on `server`.
  static func fastPathCounts(
    _ server: RosterProcess
  ) async throws -> (fast: Double, passedOn: Double) {
    let lines = try await server.metricLines()
    func value(_ path: String) -> Double {
      let line = lines.first {
        $0.hasPrefix("roster_unary_fast_path_total{") && $0.contains("path=\"\(path)\"")
      }
      return Double(line?.split(separator: " ").last ?? "0") ?? 0
    }
    return (value("fast"), value("grpc_swift"))
  }

  @Test("a call whose headers end the stream is answered at once, as a call without a message")
  func headersThatEndTheStream() async throws {
    let headers = Self.headers("/roster.v1.Directory/GetEmployee", token: self.reader)
    let before = try await Self.fastPathCounts(self.fast)
    let started = ContinuousClock.now
    let fromFast = try await rawHTTP2Call(port: self.fast.port, headers: headers, body: nil)
    let fastTook = ContinuousClock.now - started
    #expect((try await Self.fastPathCounts(self.fast)).fast == before.fast + 1)
    // grpc-swift's answer to a body without a message (the table's "no message").
    let noMessage = try await rawHTTP2Call(port: self.reference.port, headers: headers, body: [])
    #expect(
      fromFast == noMessage,
      "fast path \(fromFast), grpc-swift without a message \(noMessage)"
    )
    #expect(
      fromFast.trailer("grpc-status") != "0" && fromFast.trailer("grpc-status") != nil,
      "\(fromFast)"
    )
    // grpc-swift itself holds it until the default deadline (4 s here, 60 s by default).
    // With a client deadline (`grpc-timeout`) it answers at once, so the request has none.
    let genericStarted = ContinuousClock.now
    let fromGeneric = try await rawHTTP2Call(port: self.reference.port, headers: headers, body: nil)
    let genericTook = ContinuousClock.now - genericStarted
    print(
      "FastUnaryTests: headers ending the stream: fast path \(fastTook) (\(fromFast)), grpc-swift \(genericTook) (\(fromGeneric))"
    )
    // Held until the default deadline, the call would end in DEADLINE_EXCEEDED, as grpc-swift's
    // does: the status says whether it was answered at once, whatever the machine's load.
    #expect(fromFast.trailer("grpc-status") != "4", "DEADLINE_EXCEEDED: \(fromFast)")
  }

  @Test("each fast-path call is counted once in the request metrics, by its method and status")
  func requestMetrics() async throws {
    func counts() async throws -> [Substring: Double] {
      var found: [Substring: Double] = [:]
      for line in try await self.fast.metricLines()
      where line.hasPrefix("roster_rpc_requests_total{") {
        let parts = line.split(separator: " ")
        found[parts[0]] = Double(parts[parts.count - 1]) ?? 0
      }
      return found
    }
    var counted = 0
    for testCase in try self.cases() where testCase.fast {
      let before = try await counts()
      let reply = try await rawHTTP2Call(
        port: self.fast.port,
        headers: testCase.headers,
        body: testCase.body
      )
      let path = try #require(testCase.headers.first { $0.0 == ":path" }?.1)
      let code = try #require(reply.trailer("grpc-status").flatMap { Int($0) })
      // The interceptor's own name for the code ("OK" for 0, which is no RPCError code).
      let status =
        Status.Code(rawValue: code).flatMap(RPCError.Code.init).map(RequestLogInterceptor.name)
        ?? "OK"
      // The call is counted as it ends, which may be just after its reply is written.
      var after = before
      _ = try await eventually {
        after = try await counts()
        return after.values.reduce(0, +) != before.values.reduce(0, +)
      }
      let changed = after.filter { before[$0.key, default: 0] != $0.value }
      #expect(changed.count == 1, "\(testCase): \(changed)")
      for (sample, value) in changed {
        #expect(value == before[sample, default: 0] + 1, "\(testCase): \(sample)")
        #expect(sample.contains("method=\"\(path.dropFirst())\""), "\(testCase): \(sample)")
        #expect(sample.contains("status=\"\(status)\""), "\(testCase): \(sample)")
      }
      counted += 1
    }
    #expect(counted > 5)
  }

  @Test("a client deadline that has passed stops a fast-path call, as on grpc-swift")
  func clientDeadline() async throws {
    // A 1 ns deadline has passed before the handler starts. Either way the call is stopped
    // before its query runs: DEADLINE_EXCEEDED when the store sees the deadline first,
    // CANCELLED when the transport's timer cancels the call first (grpc-swift's executor does
    // the same, and a client has given up by then anyway).
    let body = grpcFramed(
      try Roster_V1_CountEmployeesRequest.with { $0.nameContains = "a" }.serializedBytes()
    )
    let headers = Self.headers(
      "/roster.v1.Directory/CountEmployees",
      token: self.reader,
      extra: [("grpc-timeout", "1n")]
    )
    let before = try await Self.fastPathCounts(self.fast)
    let fromFast = try await rawHTTP2Call(port: self.fast.port, headers: headers, body: body)
    let fromGeneric = try await rawHTTP2Call(
      port: self.reference.port,
      headers: headers,
      body: body
    )
    #expect((try await Self.fastPathCounts(self.fast)).fast == before.fast + 1)
    #expect(["1", "4"].contains(fromFast.trailer("grpc-status")), "\(fromFast)")
    #expect(["1", "4"].contains(fromGeneric.trailer("grpc-status")), "\(fromGeneric)")
    // The same call without a deadline counts (the filter matches the demo names).
    let counted = try await rawHTTP2Call(
      port: self.fast.port,
      headers: Self.headers("/roster.v1.Directory/CountEmployees", token: self.reader),
      body: body
    )
    #expect(counted.trailer("grpc-status") == "0", "\(counted)")
  }

  @Test(
    "a write on the fast path lands once, by its token's holder, on behalf of whom its metadata names"
  )
  func writesCarryTheirAuthor() async throws {
    let create = grpcFramed(
      try Roster_V1_CreateEmployeeRequest.with {
        $0.employee = .with {
          $0.name = "Fast Path"
          $0.department = "Research"
          $0.email = "fast.path@example.com"
          $0.startDate = "2020-01-02"
        }
      }.serializedBytes()
    )
    let before = try await Self.fastPathCounts(self.fast)
    let reply = try await rawHTTP2Call(
      port: self.fast.port,
      headers: Self.headers(
        "/roster.v1.Directory/CreateEmployee",
        token: self.writer,
        extra: [("x-roster-author", "  fast path test ")]
      ),
      body: create
    )
    #expect(reply.trailer("grpc-status") == "0", "\(reply)")
    #expect((try await Self.fastPathCounts(self.fast)).fast == before.fast + 1)
    let created = try Roster_V1_Employee(serializedBytes: Array(reply.body.dropFirst(5)))
    let queue = try DatabaseQueue(path: self.directory + "/fast.sqlite")
    let logged = try await queue.read { db in
      try Row.fetchAll(
        db,
        sql: "SELECT author, on_behalf_of FROM change_log WHERE guid = ?",
        arguments: [created.guid]
      ).map { "\($0[0] as String) for \($0[1] as String)" }
    }
    // The writer's token is a service's (no label: its hash's first bytes).
    #expect(
      logged.count == 1 && logged[0].hasPrefix("token:")
        && logged[0].hasSuffix(" for fast path test")
    )
  }
}
