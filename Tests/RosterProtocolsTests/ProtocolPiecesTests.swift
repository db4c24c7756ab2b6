import Foundation
import GRPCCore
import GRPCProtobuf
import NIOCore
import RosterProto
import Testing

@testable import RosterProtocols

/// The protocol layer's pieces that need no connection: the Connect protocol's error table,
/// what a JSON request that does not read is told, and the CORS policy.
@Suite("Protocol pieces")
struct ProtocolPiecesTests {
  @Test("every gRPC code has the Connect protocol's name and HTTP status (connectrpc.com/docs)")
  func connectCodes() {
    let table: [(RPCError.Code, String, Int)] = [
      (.cancelled, "canceled", 499), (.unknown, "unknown", 500),
      (.invalidArgument, "invalid_argument", 400), (.deadlineExceeded, "deadline_exceeded", 504),
      (.notFound, "not_found", 404), (.alreadyExists, "already_exists", 409),
      (.permissionDenied, "permission_denied", 403),
      (.resourceExhausted, "resource_exhausted", 429),
      (.failedPrecondition, "failed_precondition", 400), (.aborted, "aborted", 409),
      (.outOfRange, "out_of_range", 400), (.unimplemented, "unimplemented", 501),
      (.internalError, "internal", 500), (.unavailable, "unavailable", 503),
      (.dataLoss, "data_loss", 500), (.unauthenticated, "unauthenticated", 401),
    ]
    for (code, name, status) in table {
      let (gotName, gotStatus) = ConnectUnary.connectCode(code)
      #expect(gotName == name && gotStatus == status, "\(code): \(gotName) \(gotStatus)")
    }
  }

  @Test(
    "a content type's media type: no parameters, no spaces or tabs around it, ASCII in lower case",
    arguments: [
      ("application/json", "application/json"),
      ("Application/JSON; charset=utf-8", "application/json"),
      (" \tapplication/grpc-web+proto \t", "application/grpc-web+proto"),
      ("application/connect+json ;charset=utf-8;x=y", "application/connect+json"),
      ("", ""), (";", ""), ("  ", ""),
      // Only ASCII folds: the Kelvin sign is not a "k", whatever Unicode lower-cases it to.
      ("application/\u{212A}", "application/\u{212A}"),
    ]
  )
  func mediaType(value: String, expected: String) {
    #expect(ConnectUnary.mediaType(value) == expected)
    #expect(ConnectUnary.mediaType(Substring(value)) == expected)
  }

  @Test(
    "a request target splits at its first question mark into path and query",
    arguments: [
      ("/roster.v1.Directory/GetEmployee", "/roster.v1.Directory/GetEmployee", ""),
      ("/a/B?encoding=json&message=%7B%7D", "/a/B", "encoding=json&message=%7B%7D"),
      ("/a?", "/a", ""), ("?x", "", "x"), ("/a?b?c", "/a", "b?c"),
      ("/caf\u{E9}?q=\u{FC}", "/caf\u{E9}", "q=\u{FC}"),
    ]
  )
  func split(target: String, path: String, query: String) {
    let (gotPath, gotQuery) = ConnectUnary.split(target)
    #expect(gotPath == path && gotQuery == query)
  }

  @Test("a request's route, chosen once from its content type and path")
  func route() {
    let stream = Roster_V1_Directory.Method.StreamEmployees.descriptor
    let streams = ConnectStreams(
      methods: [
        .of(stream) { (_: StreamingServerRequest<Roster_V1_ListEmployeesRequest>, _) in
          StreamingServerResponse<Roster_V1_EmployeePage>(
            error: RPCError(code: .aborted, message: "")
          )
        }
      ],
      bridge: CallBridge(),
      maxRequestBytes: 1024,
      cors: nil,
      unaryPaths: ["/roster.v1.Directory/GetEmployee"]
    )
    let streaming = "/" + stream.fullyQualifiedMethod
    let unary = "/roster.v1.Directory/GetEmployee"
    let cases: [(String?, String, ConnectStreams.Route)] = [
      ("application/connect+json", unary, .streamed(.connect(json: true))),
      ("Application/Connect+Proto; charset=x", streaming, .streamed(.connect(json: false))),
      ("application/grpc-web+proto", streaming + "?x=y", .streamed(.grpcWeb(text: false))),
      ("application/grpc-web-text", streaming, .streamed(.grpcWeb(text: true))),
      // gRPC-Web to a unary method is answered whole, as is anything but a stream.
      ("application/grpc-web+proto", unary, .whole(mediaType: "application/grpc-web+proto")),
      ("application/JSON; charset=utf-8", unary, .whole(mediaType: "application/json")),
      ("application/json", streaming, .whole(mediaType: "application/json")),
      (nil, "/", .whole(mediaType: "")),
    ]
    for (contentType, path, expected) in cases {
      #expect(
        streams.route(contentType: contentType, path: path) == expected,
        "\(contentType ?? "-") \(path)"
      )
    }
  }

  /// The status `body` gets as a `ListEmployeesRequest`, or nil when it reads.
  func refusal(_ body: String) -> GoogleRPCStatus? {
    do {
      _ = try JSONMessages.decode(
        Roster_V1_ListEmployeesRequest.self,
        from: ByteBuffer(string: body)
      )
      return nil
    } catch {
      return error as? GoogleRPCStatus
    }
  }

  @Test("a JSON request that does not read is INVALID_ARGUMENT naming the field, or the place")
  func jsonRefusals() throws {
    #expect(refusal(#"{"pageSize": 7, "unknownField": true}"#) == nil, "unknown fields are ignored")
    let wrongType = try #require(refusal(#"{"pageSize": "many", "filter": {}}"#))
    #expect(wrongType.code == .invalidArgument)
    #expect(wrongType.message.hasPrefix("pageSize: "), "\(wrongType.message)")
    let notJSON = try #require(refusal(#"{"pageSize": "#))
    #expect(notJSON.code == .invalidArgument)
    #expect(notJSON.message.contains("is not JSON"), "\(notJSON.message)")
    let notObject = try #require(refusal("[1, 2]"))
    #expect(notObject.message.contains("must be a JSON object"), "\(notObject.message)")
    // The detail a Connect client reads: a google.rpc.BadRequest for the field.
    let metadata = RPCError(wrongType).metadata
    #expect(JSONMessages.connectDetails(metadata).map { $0["type"] } == ["google.rpc.BadRequest"])
  }

  @Test("CORS: an explicit origin with credentials, * without, others refused by name")
  func cors() {
    let explicit = CORSPolicy(origins: ["https://console.example"])
    #expect(
      explicit.headers(for: "https://console.example").contains {
        $0 == ("access-control-allow-credentials", "true")
      }
    )
    #expect(explicit.headers(for: "https://other.example").isEmpty)
    #expect(explicit.headers(for: nil).isEmpty)
    let refused = explicit.preflight(origin: "https://other.example")
    #expect(refused.status == 403)
    #expect(String(buffer: refused.body).contains("https://other.example"))
    #expect(explicit.preflight(origin: "https://console.example").status == 204)
    let any = CORSPolicy(origins: ["*"])
    #expect(any.headers(for: "https://x.example").first! == ("access-control-allow-origin", "*"))
    #expect(
      !any.headers(for: "https://x.example").contains { $0.0 == "access-control-allow-credentials" }
    )
    #expect(CORSPolicy.check(["*"]) == nil)
    #expect(CORSPolicy.check(["https://a.example:8443", "http://b.example"]) == nil)
    #expect(CORSPolicy.check(["*", "https://a.example"]) != nil)
    #expect(CORSPolicy.check(["https://a.example/path"]) != nil)
    #expect(CORSPolicy.check(["a.example"]) != nil)
  }
}
