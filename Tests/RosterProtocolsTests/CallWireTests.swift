import GRPCCore
import NIOCore
import RosterProto
import RosterServices
import RosterTransport
import Testing

@testable import RosterProtocols

/// Every protocol's streams through one server: the calls the Connect protocol and gRPC-Web
/// hand over (`CallBridge`) reach the same stream handler as the main transport's, each with
/// the `CallWire` its protocol uses; and the streaming methods' codec reads and writes the
/// form that `CallWire` names.
@Suite("One server for every protocol's streams")
struct CallWireTests {
  /// A reply writer that drops what it is given.
  struct Dropping: ClosableRPCWriterProtocol {
    typealias Element = RPCResponsePart<BufferBytes>
    func write(_ element: Element) async throws {}
    func write(contentsOf elements: some Sequence<Element>) async throws {}
    func finish() async {}
    func finish(throwing error: any Error) async {}
  }

  static func stream(_ method: String) -> RPCStream<CallBridge.Inbound, CallBridge.Outbound> {
    RPCStream(
      descriptor: MethodDescriptor(fullyQualifiedService: "test.Service", method: method),
      inbound: RPCAsyncSequence(wrapping: AsyncThrowingStream { $0.finish() }),
      outbound: RPCWriter.Closable(wrapping: Dropping())
    )
  }

  @Test("streams from both halves reach one handler, each under its protocol's CallWire")
  func oneHandler() async throws {
    let (main, web) = (CallBridge(), CallBridge())
    let transports = ServerTransports(main, web)
    let (arrived, arrival) = AsyncStream<(String, CallWire)>.makeStream()
    let peers = UnaryFastPath.Peers(nil)
    try await withThrowingTaskGroup { group in
      group.addTask {
        try await transports.listen { stream, _ in
          arrival.yield((stream.descriptor.method, CallWire.current))
        }
      }
      #expect(main.accept(Self.stream("Main"), wire: .grpc, peers: peers) != nil)
      let json = CallWire(format: .json, web: true)
      let proto = CallWire(format: .binary, web: true)
      #expect(web.accept(Self.stream("ConnectJSON"), wire: json, peers: peers) != nil)
      #expect(web.accept(Self.stream("GRPCWeb"), wire: proto, peers: peers) != nil)
      var seen: [String: CallWire] = [:]
      for await (method, wire) in arrived {
        seen[method] = wire
        if seen.count == 3 { break }
      }
      transports.beginGracefulShutdown()
      try await group.waitForAll()
      #expect(seen == ["Main": .grpc, "ConnectJSON": json, "GRPCWeb": proto])
      // Shut down: a call handed over now is refused (its client is answered `unavailable`).
      #expect(web.accept(Self.stream("Late"), wire: json, peers: peers) == nil)
    }
  }

  @Test("the streaming methods' codec: protobuf, or JSON, as the call's CallWire says")
  func codec() throws {
    let reply = Grpc_Health_V1_HealthCheckResponse.with { $0.status = .serving }
    let serializer = WireSerializer<Grpc_Health_V1_HealthCheckResponse>()
    let binary: [UInt8] = try serializer.serialize(reply)
    #expect(binary == [0x08, 0x01])
    let json: [UInt8] = try CallWire.$current.withValue(CallWire(format: .json, web: true)) {
      try serializer.serialize(reply)
    }
    #expect(String(decoding: json, as: UTF8.self) == #"{"status":"SERVING"}"#)

    let deserializer = WireDeserializer<Grpc_Health_V1_HealthCheckRequest>(prepare: {
      if $0.service.isEmpty { $0.service = "default" }
    })
    let request = Grpc_Health_V1_HealthCheckRequest.with { $0.service = "roster.v1.Directory" }
    let bytes: [UInt8] = try request.serializedBytes()
    // gRPC: the request as sent; its defaults are the Connect protocol's and gRPC-Web's alone.
    #expect(try deserializer.deserialize(bytes) == request)
    #expect(try deserializer.deserialize([UInt8]()).service == "")
    let web = try CallWire.$current.withValue(CallWire(format: .binary, web: true)) {
      () throws -> [Grpc_Health_V1_HealthCheckRequest] in
      [try deserializer.deserialize([UInt8]()), try deserializer.deserialize(bytes)]
    }
    #expect(web.map(\.service) == ["default", "roster.v1.Directory"])
    let jsonWire = CallWire(format: .json, web: true)
    let fromJSON = try CallWire.$current.withValue(jsonWire) {
      () throws -> [Grpc_Health_V1_HealthCheckRequest] in
      [
        try deserializer.deserialize(Array(#"{"service":"roster.v1.Directory"}"#.utf8)),
        try deserializer.deserialize(Array("{}".utf8)),
      ]
    }
    #expect(fromJSON.map(\.service) == ["roster.v1.Directory", "default"])
    #expect(throws: (any Error).self) {
      try CallWire.$current.withValue(jsonWire) { () throws -> Void in
        _ = try deserializer.deserialize(bytes)
      }
    }
  }
}
