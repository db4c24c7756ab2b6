import Foundation
import NIOCore
import NIOHTTP2
import NIOPosix
import RosterProto
import SwiftProtobuf
import Synchronization
import TestSupport
import Testing

/// Roster's HTTP/2 transport answers as grpc-swift's does, and manages its connections as
/// grpc-swift's does.
///
/// `roster serve` and the reference over one database and one tokens file: Roster's transport
/// (plain unary calls answered at the connection, the others through `GRPCStreamCodec` and
/// `GRPCServer`) and grpc-swift's own transport over the same services (`GRPCSwiftReference`,
/// in this process). Every request of the fast path's table (`FastUnaryTests+Cases`) must get
/// the same reply from both, byte for byte.
@Suite("Roster's HTTP/2 transport, end to end", .timeLimit(.minutes(10)), .serialized)
final class RosterTransportTests {
  let directory: String
  let fast: RosterProcess
  let reference: GRPCSwiftReference
  let reader: String
  let writer: String
  let guid: String

  init() async throws {
    self.directory = try makeTemporaryDirectory()
    // Neither server has a default deadline: the table's calls are not about deadlines, and a
    // CI run on a starved machine saw the reference's 4 s pass on one of them
    // (DEADLINE_EXCEEDED from grpc-swift, the reply from Roster's transport).
    let setup = try await FastUnaryTests.servers(
      in: self.directory,
      database: "transport.sqlite",
      defaultDeadlineMs: 0
    )
    self.reader = setup.reader
    self.writer = setup.writer
    let common = setup.arguments
    self.fast = try await RosterProcess.serve(arguments: common)
    self.reference = try await GRPCSwiftReference.start(
      database: self.directory + "/transport.sqlite",
      tokensFile: self.directory + "/tokens",
      maxRequestBytes: FastUnaryTests.maxRequestBytes,
      defaultDeadline: nil
    )
    var page = RawHTTP2Reply(headers: nil, body: [], trailers: [])
    for port in [self.fast.port, self.reference.port] {
      page = try await rawHTTP2Call(
        port: port,
        headers: FastUnaryTests.headers("/roster.v1.Directory/ListEmployees", token: self.reader),
        body: grpcFramed(
          try Roster_V1_ListEmployeesRequest.with { $0.pageSize = 1 }.serializedBytes()
        )
      )
    }
    let listed = try Roster_V1_ListEmployeesResponse(serializedBytes: Array(page.body.dropFirst(5)))
    self.guid = try #require(listed.employees.first?.guid)
  }

  deinit {
    _ = self.fast.terminate()
    self.reference.stop()
    try? FileManager.default.removeItem(atPath: self.directory)
  }

  @Test(
    "every request of the fast path's table gets grpc-swift's reply, and takes the path it should"
  )
  func sameReplies() async throws {
    for testCase in try FastUnaryTests.cases(guid: self.guid, reader: self.reader) {
      let before = try await FastUnaryTests.fastPathCounts(self.fast)
      let fromFast = try await rawHTTP2Call(
        port: self.fast.port,
        headers: testCase.headers,
        body: testCase.body
      )
      let after = try await FastUnaryTests.fastPathCounts(self.fast)
      let fromReference = try await rawHTTP2Call(
        port: self.reference.port,
        headers: testCase.headers,
        body: testCase.body
      )
      if let status = Self.statusInsteadOfReset[testCase.name] {
        // Where grpc-swift resets the stream, Roster's transport ends the call with a status
        // that says why (the abuse suite's "a clear status").
        #expect(fromReference.reset, "\(testCase): grpc-swift \(fromReference)")
        for reply in [fromFast] {
          #expect(reply.trailer("grpc-status") == status.code, "\(testCase): \(reply)")
          #expect(
            reply.trailer("grpc-message")?.contains(status.mentioning) == true,
            "\(testCase): \(reply)"
          )
        }
      } else if Self.connectInsteadOfBare415.contains(testCase.name) {
        // A request that is not gRPC is the Connect protocol's on Roster's transport: the
        // same 415, with a body that says what is served.
        #expect(
          fromReference.trailers == [":status: 415"],
          "\(testCase): grpc-swift \(fromReference)"
        )
        for reply in [fromFast] {
          #expect(reply.headers?.first == ":status: 415", "\(testCase): \(reply)")
          #expect(
            reply.headers?.contains("content-type: application/json") == true,
            "\(testCase): \(reply)"
          )
          let text = String(decoding: reply.body, as: UTF8.self)
          #expect(
            text.contains("\"code\":\"unimplemented\"") && text.contains("application/grpc"),
            "\(testCase): \(text)"
          )
        }
      } else {
        #expect(
          fromFast == fromReference,
          "\(testCase): Roster's transport \(fromFast), grpc-swift \(fromReference)"
        )
      }
      if testCase.fast {
        #expect(after.fast == before.fast + 1, "\(testCase) was not answered at the connection")
      } else {
        #expect(after.fast == before.fast, "\(testCase) was answered at the connection")
      }
    }
  }

  @Test("requests grpc-swift refuses before reading them are refused the same way")
  func refusals() async throws {
    // (A request without `:scheme` is not here: swift-nio-http2 will not send one, and on the
    // server it resets such a stream before any gRPC code sees it, on either transport.)
    let get = "/roster.v1.Directory/GetEmployee"
    let request = grpcFramed(
      try Roster_V1_GetEmployeeRequest.with { $0.guid = self.guid }.serializedBytes()
    )
    let cases: [(String, [(String, String)])] = [
      (
        "a path that is not /service/method", FastUnaryTests.headers("/nothing", token: self.reader)
      ),
      (
        "an unknown method", FastUnaryTests.headers("/roster.v1.Directory/Nope", token: self.reader)
      ),
      (
        "scheme ftp",
        FastUnaryTests.headers(get, token: self.reader).map {
          $0.0 == ":scheme" ? ($0.0, "ftp") : $0
        }
      ),
      (
        "an unknown encoding",
        FastUnaryTests.headers(get, token: self.reader, extra: [("grpc-encoding", "snappy")])
      ),
    ]
    for (name, headers) in cases {
      var reply = try await rawHTTP2Call(port: self.fast.port, headers: headers, body: request)
      var reference = try await rawHTTP2Call(
        port: self.reference.port,
        headers: headers,
        body: request
      )
      // Both accept gzip, deflate and identity, and say so: Roster's transport in one
      // grpc-accept-encoding field, grpc-swift's in one field each.
      for index in [0, 1] {
        var trailers = index == 0 ? reply.trailers : reference.trailers
        let accepted = trailers.filter { $0.hasPrefix("grpc-accept-encoding: ") }
          .flatMap { $0.dropFirst("grpc-accept-encoding: ".count).split(separator: ",") }
        guard !accepted.isEmpty else { continue }
        #expect(Set(accepted) == ["gzip", "deflate", "identity"], "\(name): \(trailers)")
        trailers =
          trailers.filter { !$0.hasPrefix("grpc-accept-encoding: ") } + ["grpc-accept-encoding"]
        if index == 0 { reply.trailers = trailers } else { reference.trailers = trailers }
      }
      #expect(reply == reference, "\(name): Roster's transport \(reply), grpc-swift \(reference)")
    }
  }

  /// The table's requests that grpc-swift answers with a reset stream and Roster's transport
  /// with a status: its code and a word of its message.
  /// The requests that are not gRPC: Roster's transport answers them by the Connect protocol.
  static let connectInsteadOfBare415: Set<String> = [
    "content type text/plain: HTTP 415", "no content type",
  ]

  static let statusInsteadOfReset: [String: (code: String, mentioning: String)] = [
    "the compressed flag without an encoding": ("13", "grpc-encoding"),
    "over the size limit: RESOURCE_EXHAUSTED": ("8", "over the limit"),
  ]

  @Test("streaming calls: a server stream, a client stream, reflection's bidirectional stream")
  func streams() async throws {
    // StreamEmployees: every employee, in pages, the same bytes as grpc-swift's.
    let stream = FastUnaryTests.headers("/roster.v1.Directory/StreamEmployees", token: self.reader)
    let streamBody = grpcFramed(
      try Roster_V1_ListEmployeesRequest.with { $0.pageSize = 7 }.serializedBytes()
    )
    let streamed = try await rawHTTP2Call(port: self.fast.port, headers: stream, body: streamBody)
    let streamedReference = try await rawHTTP2Call(
      port: self.reference.port,
      headers: stream,
      body: streamBody
    )
    #expect(streamed.trailer("grpc-status") == "0", "\(streamed)")
    #expect(streamed == streamedReference)
    #expect(Self.messages(in: streamed.body).count >= 8, "50 employees in pages of 7")

    // UpsertEmployees: two messages from the client, one reply.
    func upsert(_ name: String) throws -> [UInt8] {
      grpcFramed(
        try Roster_V1_UpsertEmployeesRequest.with {
          $0.employees = [
            .with {
              $0.guid = UUID().uuidString.lowercased()
              $0.name = name
              $0.department = "Transport"
              $0.email = "\(name.lowercased().replacingOccurrences(of: " ", with: "."))@example.com"
              $0.startDate = "2021-03-04"
            }
          ]
        }.serializedBytes()
      )
    }
    let upserted = try await rawHTTP2Call(
      port: self.fast.port,
      headers: FastUnaryTests.headers("/roster.v1.Directory/UpsertEmployees", token: self.writer),
      body: try upsert("Stream One") + upsert("Stream Two")
    )
    #expect(upserted.trailer("grpc-status") == "0", "\(upserted)")
    let summary = try Roster_V1_UpsertEmployeesResponse(
      serializedBytes: Array(upserted.body.dropFirst(5))
    )
    #expect(summary.inserted + summary.updated == 2, "\(summary)")

    // Reflection (bidirectional): the list of services.
    let reflection = FastUnaryTests.headers(
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      token: nil
    )
    let listBody = grpcFramed(
      try Grpc_Reflection_V1_ServerReflectionRequest.with { $0.listServices = "" }.serializedBytes()
    )
    let listed = try await rawHTTP2Call(port: self.fast.port, headers: reflection, body: listBody)
    let listedReference = try await rawHTTP2Call(
      port: self.reference.port,
      headers: reflection,
      body: listBody
    )
    #expect(listed.trailer("grpc-status") == "0", "\(listed)")
    #expect(listed == listedReference)
  }

  /// The messages of a gRPC body.
  static func messages(in body: [UInt8]) -> [[UInt8]] {
    var messages: [[UInt8]] = []
    var index = 0
    while index + 5 <= body.count {
      let length = body[index + 1 ..< index + 5].reduce(0) { $0 << 8 | Int($1) }
      messages.append(Array(body[index + 5 ..< min(body.count, index + 5 + length)]))
      index += 5 + length
    }
    return messages
  }
}
