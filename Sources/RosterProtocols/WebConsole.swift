internal import Foundation
internal import NIOCore
internal import RosterTransport

/// The web console: the files in `Sources/RosterProtocols/Console`, compiled into the binary
/// (`Package.swift` embeds them), served at `/` to `GET` on either HTTP version. The page
/// calls the server's own Connect JSON API from the same origin, so it needs no CORS.
///
/// Each file carries an `ETag` (its fingerprint) and `cache-control: no-cache`, so a browser
/// asks again and gets 304 until the binary changes; a gzip copy is made once for clients
/// that accept it. A strict content security policy allows scripts, styles and calls from
/// the page's own origin only, and images from `data:` and `blob:` URLs (thumbnails and
/// pictures); with sign-in through the company's provider (`signingIn`), calls to the provider's
/// origin too, for its discovery document and its token endpoint.
package struct WebConsole: Sendable {
  struct File: Sendable {
    var contentType: String
    var body: ByteBuffer
    var gzipped: ByteBuffer?
    var etag: String

    init(_ contentType: String, _ bytes: [UInt8]) {
      self.contentType = contentType
      self.body = ByteBuffer(bytes: bytes)
      self.gzipped = MessageEncoding.gzip.compress(self.body, allocator: ByteBufferAllocator())
      self.etag = "\"\(ConnectUnary.fingerprint(self.body))\""
    }
  }

  let files: [String: File]
  /// The security headers of every file.
  let securityHeaders: [(String, String)]

  init(files: [String: File], connectSources: [String] = []) {
    self.files = files
    self.securityHeaders = Self.securityHeaders(connectSources: connectSources)
  }

  /// This console with sign-in through an OpenID Connect provider: `/console-config.json`
  /// tells the page the provider's issuer, the console's client id at it and the scopes to ask
  /// for; the page then signs in with the authorization code flow and PKCE, and calls with the
  /// access token. The provider's token endpoint must be on the issuer's origin.
  package func signingIn(issuer: String, clientID: String, scope: String) -> WebConsole {
    var files = self.files
    let settings = ["issuer": issuer, "clientId": clientID, "scope": scope]
    let json =
      (try? JSONSerialization.data(withJSONObject: settings, options: [.sortedKeys])) ?? Data()
    files["/console-config.json"] = File("application/json", Array(json))
    let origin = URLComponents(string: issuer).map { parts -> String in
      var origin = URLComponents()
      (origin.scheme, origin.host, origin.port) = (parts.scheme, parts.host, parts.port)
      return origin.string ?? issuer
    }
    return WebConsole(files: files, connectSources: origin.map { [$0] } ?? [])
  }

  package static let embedded: WebConsole = {
    let page = File("text/html; charset=utf-8", PackageResources.index_html)
    return WebConsole(files: [
      "/": page,
      "/index.html": page,
      "/console.js": File("text/javascript; charset=utf-8", PackageResources.console_js),
      "/console.css": File("text/css; charset=utf-8", PackageResources.console_css),
      // No provider: the page offers pasted tokens only (`signingIn` replaces it).
      "/console-config.json": File("application/json", Array("{}".utf8)),
    ])
  }()

  static func securityHeaders(connectSources: [String]) -> [(String, String)] {
    [
      (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src "
          + (["'self'"] + connectSources).joined(separator: " ")
          + "; img-src 'self' data: blob:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
      ),
      ("x-content-type-options", "nosniff"),
      ("referrer-policy", "no-referrer"),
    ]
  }

  /// The reply to `request` if it asks for one of the console's files; nil otherwise.
  func reply(to request: PlainHTTPRequest) -> PlainHTTPReply? {
    guard request.method == "GET", let file = self.files[ConnectUnary.split(request.target).path]
    else {
      return nil
    }
    var headers =
      [("etag", file.etag), ("cache-control", "no-cache"), ("vary", "Accept-Encoding")]
      + self.securityHeaders
    if let ifNoneMatch = request.headers.first(name: "if-none-match"),
      ifNoneMatch.split(separator: ",").contains(where: {
        $0.trimmingCharacters(in: .whitespaces) == file.etag
      })
    {
      return PlainHTTPReply(status: 304, headers: headers, body: ByteBuffer())
    }
    headers.insert(("content-type", file.contentType), at: 0)
    let accepted = request.headers[canonicalForm: "accept-encoding"].map {
      ConnectUnary.mediaType($0)
    }
    if let gzipped = file.gzipped, accepted.contains("gzip") {
      return PlainHTTPReply(
        status: 200,
        headers: headers + [("content-encoding", "gzip")],
        body: gzipped
      )
    }
    return PlainHTTPReply(status: 200, headers: headers, body: file.body)
  }
}
