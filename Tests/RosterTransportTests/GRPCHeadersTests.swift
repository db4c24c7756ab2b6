import GRPCCore
import NIOHPACK
import Testing

@testable import RosterTransport

/// The gRPC response headers and trailers Roster writes, in order: the ones most calls end with
/// (made once) are the same as those made for calls that add metadata or a message.
@Suite("gRPC headers and trailers")
struct GRPCHeadersTests {
  static func fields(_ headers: HPACKHeaders) -> [String] {
    headers.map { "\($0.name): \($0.value)" }
  }

  @Test("response headers: :status and content-type first, then the metadata")
  func response() {
    #expect(
      Self.fields(HPACKHeaders(response: [:])) == [
        ":status: 200", "content-type: application/grpc",
      ]
    )
    #expect(
      Self.fields(HPACKHeaders(response: ["X-Tag": "a", "blob-bin": .binary([1, 2])]))
        == [":status: 200", "content-type: application/grpc", "x-tag: a", "blob-bin: AQI="]
    )
  }

  @Test("trailers: grpc-status, the message percent-encoded, the metadata; trailers-only first")
  func trailers() {
    let ok = Status(code: .ok, message: "")
    #expect(
      Self.fields(HPACKHeaders(status: ok, metadata: [:], trailersOnly: false)) == [
        "grpc-status: 0"
      ]
    )
    #expect(
      Self.fields(HPACKHeaders(status: ok, metadata: [:], trailersOnly: true))
        == [":status: 200", "content-type: application/grpc", "grpc-status: 0"]
    )
    #expect(
      Self.fields(HPACKHeaders(status: ok, metadata: ["k": "v"], trailersOnly: false))
        == ["grpc-status: 0", "k: v"]
    )
    let failed = Status(code: .notFound, message: "no 100% match é")
    #expect(
      Self.fields(HPACKHeaders(status: failed, metadata: [:], trailersOnly: false))
        == ["grpc-status: 5", "grpc-message: no 100%25 match %C3%A9"]
    )
  }

  @Test("request metadata: every header, -bin values decoded, others as they came")
  func requestMetadata() {
    let metadata = Metadata(
      HPACKHeaders([("te", "trailers"), ("trace-bin", "AQI"), ("x-bin-not", "AQI"), ("n", "x")])
    )
    #expect(Array(metadata[stringValues: "te"]) == ["trailers"])
    #expect(Array(metadata[binaryValues: "trace-bin"]) == [[1, 2]])
    #expect(Array(metadata[stringValues: "x-bin-not"]) == ["AQI"])
    #expect(Array(metadata[stringValues: "n"]) == ["x"])
  }
}
