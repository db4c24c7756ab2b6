import Foundation
import FoundationNetworking
import GRDB
import RosterProto
import SwiftProtobuf
import TestSupport
import Testing

/// The requests `FastUnaryTests` and `RosterTransportTests` send: plain calls and every kind
/// of malformed one.
extension FastUnaryTests {
  /// The table, for the employee `guid` and a reader's token (`RosterTransportTests` sends it
  /// too).
  static func cases(guid: String, reader: String) throws -> [Case] {
    let get = "/roster.v1.Directory/GetEmployee"
    let health = "/grpc.health.v1.Health/Check"
    let request = grpcFramed(
      try Roster_V1_GetEmployeeRequest.with { $0.guid = guid }.serializedBytes()
    )
    func getting(_ guid: String, mask: [String] = []) throws -> [UInt8] {
      grpcFramed(
        try Roster_V1_GetEmployeeRequest.with {
          $0.guid = guid
          if !mask.isEmpty { $0.readMask = .with { $0.paths = mask } }
        }.serializedBytes()
      )
    }
    return [
      Case(
        name: "GetEmployee",
        headers: Self.headers(get, token: reader),
        body: request,
        fast: true
      ),
      Case(
        name: "GetEmployee with a read mask",
        headers: Self.headers(get, token: reader),
        body: try getting(guid, mask: ["name", "email"]),
        fast: true
      ),
      Case(
        name: "GetEmployee, unknown guid: NOT_FOUND",
        headers: Self.headers(get, token: reader),
        body: try getting("00000000-0000-4000-8000-000000000000"),
        fast: true
      ),
      Case(
        name: "GetEmployee, malformed guid: INVALID_ARGUMENT, message percent-encoded",
        headers: Self.headers(get, token: reader),
        body: try getting("José 100%"),
        fast: true
      ),
      Case(
        name: "GetEmployee, unknown read mask path",
        headers: Self.headers(get, token: reader),
        body: try getting(guid, mask: ["salary"]),
        fast: true
      ),
      // 200 KB: many DATA frames, past the stream's first flow-control window.
      Case(
        name: "a large request (an unknown field of 200 KB)",
        headers: Self.headers(get, token: reader),
        body: grpcFramed(Array(request.dropFirst(5)) + Self.unknownField(bytes: 200_000)),
        fast: true
      ),
      Case(
        name: "a message that is not protobuf",
        headers: Self.headers(get, token: reader),
        body: grpcFramed([0xFF, 0xFF, 0xFF]),
        fast: true
      ),
      Case(
        name: "content type application/grpc+proto",
        headers: Self.headers(get, token: reader).map {
          $0.0 == "content-type" ? ($0.0, "application/grpc+proto") : $0
        },
        body: request,
        fast: true
      ),
      Case(
        name: "grpc-encoding identity",
        headers: Self.headers(get, token: reader, extra: [("grpc-encoding", "identity")]),
        body: request,
        fast: true
      ),
      Case(
        name: "grpc-accept-encoding gzip (the server compresses nothing)",
        headers: Self.headers(get, token: reader, extra: [("grpc-accept-encoding", "gzip")]),
        body: request,
        fast: true
      ),
      Case(
        name: "custom and binary metadata",
        headers: Self.headers(
          get,
          token: reader,
          extra: [("x-trace", "abc"), ("x-trace-bin", "AAEC")]
        ),
        body: request,
        fast: true
      ),
      Case(
        name: "a client deadline far off",
        headers: Self.headers(get, token: reader, extra: [("grpc-timeout", "10S")]),
        body: request,
        fast: true
      ),
      Case(
        name: "no token: UNAUTHENTICATED",
        headers: Self.headers(get, token: nil),
        body: request,
        fast: true
      ),
      Case(
        name: "an unknown token: UNAUTHENTICATED",
        headers: Self.headers(get, token: "roster_not_a_token"),
        body: request,
        fast: true
      ),
      Case(
        name: "a reader deleting: PERMISSION_DENIED",
        headers: Self.headers("/roster.v1.Directory/DeleteEmployee", token: reader),
        body: grpcFramed(
          try Roster_V1_DeleteEmployeeRequest.with { $0.guid = guid }.serializedBytes()
        ),
        fast: true
      ),
      Case(
        name: "Health.Check",
        headers: Self.headers(health, token: nil),
        body: grpcFramed([]),
        fast: true
      ),
      Case(
        name: "Health.Check of an unknown service: NOT_FOUND",
        headers: Self.headers(health, token: nil),
        body: grpcFramed(
          try Grpc_Health_V1_HealthCheckRequest.with { $0.service = "nope" }.serializedBytes()
        ),
        fast: true
      ),
      Case(
        name: "ListEmployees",
        headers: Self.headers("/roster.v1.Directory/ListEmployees", token: reader),
        body: grpcFramed(
          try Roster_V1_ListEmployeesRequest.with { $0.pageSize = 5 }.serializedBytes()
        ),
        fast: true
      ),
      Case(
        name: "CountEmployees",
        headers: Self.headers("/roster.v1.Directory/CountEmployees", token: reader),
        body: grpcFramed([]),
        fast: true
      ),
      // Not plain: grpc-swift answers, through the fast server too.
      Case(
        name: "grpc-encoding gzip, a message not compressed (the flag allows it)",
        headers: Self.headers(get, token: reader, extra: [("grpc-encoding", "gzip")]),
        body: request,
        fast: false
      ),
      Case(
        name: "two encodings",
        headers: Self.headers(get, token: reader, extra: [("grpc-encoding", "identity, gzip")]),
        body: request,
        fast: false
      ),
      Case(
        name: "the compressed flag without an encoding",
        headers: Self.headers(get, token: reader),
        body: grpcFramed(Array(request.dropFirst(5)), compressedFlag: 1),
        fast: false
      ),
      Case(
        name: "over the size limit: RESOURCE_EXHAUSTED",
        headers: Self.headers(get, token: reader),
        body: try getting(String(repeating: "x", count: 600_000)),
        fast: false
      ),
      Case(name: "no message", headers: Self.headers(get, token: reader), body: [], fast: false),
      Case(
        name: "two messages",
        headers: Self.headers(get, token: reader),
        body: request + request,
        fast: false
      ),
      Case(
        name: "a truncated message",
        headers: Self.headers(get, token: reader),
        body: Array(request.dropLast()),
        fast: false
      ),
      Case(
        name: "content type text/plain: HTTP 415",
        headers: Self.headers(get, token: reader).map {
          $0.0 == "content-type" ? ($0.0, "text/plain") : $0
        },
        body: request,
        fast: false
      ),
      Case(
        name: "no content type",
        headers: Self.headers(get, token: reader).filter { $0.0 != "content-type" },
        body: request,
        fast: false
      ),
      Case(
        name: "method GET",
        headers: Self.headers(get, token: reader).map { $0.0 == ":method" ? ($0.0, "GET") : $0 },
        body: request,
        fast: false
      ),
    ]
  }

  /// A length-delimited protobuf field no message declares (number 1000) of `bytes` bytes.
  static func unknownField(bytes: Int) -> [UInt8] {
    func varint(_ value: Int) -> [UInt8] {
      var value = value
      var out: [UInt8] = []
      while value >= 0x80 {
        out.append(UInt8(value & 0x7F) | 0x80)
        value >>= 7
      }
      return out + [UInt8(value)]
    }
    return varint(1000 << 3 | 2) + varint(bytes) + [UInt8](repeating: 7, count: bytes)
  }
}
