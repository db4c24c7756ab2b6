import NIOHPACK
import Testing

@testable import RosterTransport

/// `RequestHeaderCheck`: the blocks clients send are well-formed; each rule of RFC 9113 that
/// swift-nio-http2 enforced refuses its own malformed block (the abuse suite sends these to
/// the built server and checks the reset).
@Suite("Request header checks")
struct RequestHeaderCheckTests {
  static let grpc: [(String, String)] = [
    (":method", "POST"), (":scheme", "http"), (":path", "/roster.v1.Directory/GetEmployee"),
    (":authority", "localhost:8080"), ("content-type", "application/grpc"), ("te", "trailers"),
    ("grpc-timeout", "5S"), ("user-agent", "grpc-go/1.70.0"), ("x-note", "a value, with spaces\t"),
  ]

  static func check(
    _ headers: [(String, String)],
    _ block: RequestHeaderCheck.Block = .request
  ) -> Bool {
    RequestHeaderCheck.isWellFormed(HPACKHeaders(headers), block)
  }

  static func replacing(_ name: String, with value: String) -> [(String, String)] {
    Self.grpc.map { $0.0 == name ? (name, value) : $0 }
  }

  static func without(_ name: String) -> [(String, String)] {
    Self.grpc.filter { $0.0 != name }
  }

  @Test("well-formed blocks pass: a gRPC call, a browser's GET, a CONNECT, trailers")
  func wellFormed() {
    #expect(Self.check(Self.grpc))
    #expect(Self.check(Self.without(":authority")))
    #expect(
      Self.check([
        (":method", "GET"), (":scheme", "https"), (":path", "/?q=caf%C3%A9"),
        (":authority", "example"),
        ("accept-language", "fr-CH, fr;q=0.9"), ("cookie", "a=1; b=\"2\""), ("x-utf8", "café"),
      ])
    )
    #expect(Self.check([(":method", "CONNECT"), (":authority", "example:443")]))
    #expect(Self.check([("grpc-status", "0"), ("x-checksum", "abc")], .trailers))
    #expect(Self.check([], .trailers))
  }

  @Test("malformed names and values are refused")
  func malformedFields() {
    #expect(!Self.check(Self.grpc + [("", "empty name")]))
    #expect(!Self.check(Self.grpc + [("X-Upper", "1")]))
    #expect(!Self.check(Self.grpc + [("x note", "1")]))
    #expect(!Self.check(Self.grpc + [("x-é", "1")]))
    #expect(!Self.check(Self.grpc + [("x-note", "a\nb")]))
    #expect(!Self.check(Self.grpc + [("x-note", "a\rb")]))
    #expect(!Self.check(Self.grpc + [("x-note", "a\u{0}b")]))
    #expect(!Self.check(Self.replacing(":path", with: "/a b")))
    #expect(!Self.check(Self.replacing(":path", with: "/a\u{7f}")))
    #expect(!Self.check(Self.replacing(":authority", with: "host\t")))
  }

  @Test("connection-specific fields, and te other than trailers, are refused")
  func connectionSpecific() {
    for name in ["connection", "transfer-encoding", "proxy-connection", "keep-alive", "upgrade"] {
      #expect(!Self.check(Self.grpc + [(name, "x")]), "\(name)")
      #expect(!Self.check([(name, "x")], .trailers), "\(name) in trailers")
    }
    #expect(!Self.check(Self.replacing("te", with: "gzip")))
    // `te` is a request's field; trailers are not held to it, as swift-nio-http2 did not.
    #expect(Self.check([("te", "gzip")], .trailers))
    #expect(Self.check(Self.grpc + [("tea", "x"), ("upgrades", "x")]))
  }

  @Test("pseudo-headers: all a request needs, each once, known, first; none in trailers")
  func pseudoHeaders() {
    for name in [":method", ":scheme", ":path"] {
      #expect(!Self.check(Self.without(name)), "without \(name)")
    }
    #expect(!Self.check(Self.replacing(":path", with: "")))
    #expect(!Self.check([(":method", "POST")] + Self.grpc))
    #expect(!Self.check(Self.grpc + [(":authority", "late")]))
    #expect(!Self.check([(":status", "200")] + Self.grpc))
    #expect(!Self.check([(":protocol", "websocket")] + Self.grpc))
    #expect(!Self.check([(":Method", "POST")] + Self.without(":method")))
    #expect(!Self.check([(":method", "CONNECT"), (":authority", "a"), (":path", "/")]))
    #expect(!Self.check([(":method", "CONNECT")]))
    #expect(!Self.check([(":path", "/")], .trailers))
  }
}
