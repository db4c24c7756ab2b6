internal import NIOCore

/// Which web pages may call the Connect protocol from a browser (`roster serve
/// --cors-origin`), answered as connectrpc's `cors` package advises: a preflight (`OPTIONS`
/// with `Access-Control-Request-Method`) from an allowed origin gets the methods, the request
/// headers a Connect, gRPC-Web or Roster client sends (`authorization` among them) and a max
/// age; every reply to an allowed origin exposes the headers a client reads. An explicit
/// origin is allowed with credentials; `*` allows any origin, never with credentials.
public struct CORSPolicy: Sendable, Equatable {
  /// The allowed origins (`https://HOST[:PORT]`), or `["*"]`.
  public var origins: [String]

  public init(origins: [String]) {
    self.origins = origins
  }

  static let allowedMethods = "GET, POST"
  static let allowedHeaders = [
    "authorization", "content-type", "connect-protocol-version", "connect-timeout-ms",
    "grpc-timeout",
    "x-grpc-web", "x-user-agent", "x-roster-author", "x-roster-change-token", "if-none-match",
  ].joined(separator: ", ")
  static let exposedHeaders = [
    "grpc-status", "grpc-message", "grpc-status-details-bin", "etag", "content-length",
    "x-roster-change-token",
  ].joined(separator: ", ")
  /// Seconds a browser may keep a preflight's answer.
  static let maxAge = "7200"

  /// Whether `origin` may call.
  func allows(_ origin: String) -> Bool {
    self.origins.contains("*") || self.origins.contains(origin)
  }

  /// The headers for a reply to `origin`: none when it may not call.
  func headers(for origin: String?) -> [(String, String)] {
    guard let origin, self.allows(origin) else { return [] }
    if self.origins.contains(origin) {
      return [
        ("access-control-allow-origin", origin), ("access-control-allow-credentials", "true"),
        ("access-control-expose-headers", Self.exposedHeaders), ("vary", "Origin"),
      ]
    }
    return [
      ("access-control-allow-origin", "*"), ("access-control-expose-headers", Self.exposedHeaders),
    ]
  }

  /// The answer to a preflight from `origin`: 204 with what it may send, or 403 naming the
  /// origin when it may not call.
  func preflight(origin: String?) -> PlainHTTPReply {
    guard let origin, self.allows(origin) else {
      return ConnectUnary.errorReply(
        code: .permissionDenied,
        message:
          "origin \(origin ?? "(none)") may not call this server (roster serve --cors-origin)",
        status: 403,
        metadata: []
      )
    }
    var headers = self.headers(for: origin).filter { $0.0 != "access-control-expose-headers" }
    headers += [
      ("access-control-allow-methods", Self.allowedMethods),
      ("access-control-allow-headers", Self.allowedHeaders),
      ("access-control-max-age", Self.maxAge),
    ]
    return PlainHTTPReply(status: 204, headers: headers, body: ByteBuffer())
  }

  /// Checks `--cors-origin` values: `*` alone, or origins (`http://` or `https://`, a host, an
  /// optional port, nothing after).
  public static func check(_ origins: [String]) -> String? {
    if origins.contains("*") && origins.count > 1 {
      return "--cors-origin '*' allows every origin: give it alone"
    }
    for origin in origins where origin != "*" {
      let parts = origin.split(separator: "/", omittingEmptySubsequences: false)
      guard parts.count == 3, parts[0] == "http:" || parts[0] == "https:", parts[1].isEmpty,
        !parts[2].isEmpty
      else {
        return
          "--cors-origin '\(origin)' is not an origin: write it as https://HOST[:PORT], with no path"
      }
    }
    return nil
  }
}
