import Foundation
import JWTKit
import RosterIdentity
import Testing

/// `TokenVerifier` alone, with tokens signed here by JWTKit: the times at the clock skew's
/// edges, a key id left out, claims read at a dotted path, and a key that changes under a
/// remembered token. The interop suite (Tests/Interop/identity) drives the same checks
/// through the binary with a provider written in Python.
@Suite("Token verifier")
struct TokenVerifierTests {
  struct Payload: JWTPayload {
    var iss: String
    var aud: [String]
    var sub: String
    var exp: Double
    var nbf: Double?
    var realm_access: [String: [String]]?
    func verify(using algorithm: some JWTAlgorithm) throws {}
  }

  static let issuer = "https://id.example"
  static let now = Date(timeIntervalSince1970: 1_900_000_000)

  /// A verifier holding `keys` (kid → key), and a function signing payloads with one of them.
  static func verifier(
    _ keys: [String: ES256PrivateKey],
    settings: (inout TokenVerifier.Settings) -> Void = { _ in }
  ) async throws -> TokenVerifier {
    var configured = TokenVerifier.Settings(issuer: Self.issuer, audience: "roster")
    settings(&configured)
    let verifier = TokenVerifier(settings: configured)
    try await verifier.install(jwks: Self.jwks(keys))
    return verifier
  }

  static func jwks(_ keys: [String: ES256PrivateKey]) throws -> Data {
    let entries = keys.map { kid, key -> [String: String] in
      let point = key.publicKey.parameters!
      return ["kty": "EC", "crv": "P-256", "kid": kid, "x": point.x, "y": point.y]
    }
    return try JSONSerialization.data(withJSONObject: ["keys": entries])
  }

  static func sign(
    _ key: ES256PrivateKey,
    kid: String?,
    exp: Double = Self.now.timeIntervalSince1970 + 600,
    nbf: Double? = nil,
    roles: [String]? = nil
  ) async throws -> Substring {
    let keys = JWTKeyCollection()
    await keys.add(ecdsa: key)
    let payload = Payload(
      iss: Self.issuer,
      aud: ["roster"],
      sub: "ada",
      exp: exp,
      nbf: nbf,
      realm_access: roles.map { ["roles": $0] }
    )
    return Substring(try await keys.sign(payload, kid: kid.map { JWKIdentifier(string: $0) }))
  }

  @Test("exp and nbf are checked with the clock skew on either side")
  func clockSkew() async throws {
    let key = ES256PrivateKey()
    let verifier = try await Self.verifier(["k1": key])
    let now = Self.now.timeIntervalSince1970
    let justExpired = try await Self.sign(key, kid: "k1", exp: now - 59)
    #expect(try verifier.verify(justExpired, now: Self.now).get().subject == "ada")
    let expired = try await Self.sign(key, kid: "k1", exp: now - 61)
    #expect(throws: TokenVerifier.Refusal.self) {
      try verifier.verify(expired, now: Self.now).get()
    }
    let soon = try await Self.sign(key, kid: "k1", nbf: now + 59)
    #expect(try verifier.verify(soon, now: Self.now).get().subject == "ada")
    let later = try await Self.sign(key, kid: "k1", nbf: now + 61)
    #expect(throws: TokenVerifier.Refusal.self) { try verifier.verify(later, now: Self.now).get() }
    // Remembered, a token still expires.
    let remembered = try await Self.sign(key, kid: "k1", exp: now + 10)
    #expect(throws: Never.self) { try verifier.verify(remembered, now: Self.now).get() }
    let afterwards = Self.now.addingTimeInterval(71)
    let refusal = #expect(throws: TokenVerifier.Refusal.self) {
      try verifier.verify(remembered, now: afterwards).get()
    }
    #expect(refusal?.reason == "the token has expired")
  }

  @Test("a token without a kid passes only while the set holds one key")
  func missingKeyID() async throws {
    let key = ES256PrivateKey()
    let token = try await Self.sign(key, kid: nil)
    let alone = try await Self.verifier(["k1": key])
    #expect(throws: Never.self) { try alone.verify(token, now: Self.now).get() }
    let two = try await Self.verifier(["k1": key, "k2": ES256PrivateKey()])
    let refusal = #expect(throws: TokenVerifier.Refusal.self) {
      try two.verify(token, now: Self.now).get()
    }
    #expect(refusal?.reason.contains("no key id") == true)
  }

  @Test("the roles claim is read at a dotted path")
  func dottedRoles() async throws {
    let key = ES256PrivateKey()
    let verifier = try await Self.verifier(["k1": key]) { $0.rolesClaim = "realm_access.roles" }
    let token = try await Self.sign(key, kid: "k1", roles: ["roster-admins", "staff"])
    #expect(try verifier.verify(token, now: Self.now).get().roles == ["roster-admins", "staff"])
  }

  @Test("a remembered token is checked again once its key id names another key")
  func changedKey() async throws {
    let first = ES256PrivateKey()
    let verifier = try await Self.verifier(["k1": first])
    let token = try await Self.sign(first, kid: "k1")
    #expect(throws: Never.self) { try verifier.verify(token, now: Self.now).get() }
    // The same set again: the token stays good.
    try await verifier.install(jwks: Self.jwks(["k1": first]))
    #expect(throws: Never.self) { try verifier.verify(token, now: Self.now).get() }
    // k1 now names another key: the remembered token no longer passes.
    try await verifier.install(jwks: Self.jwks(["k1": ES256PrivateKey()]))
    let refusal = #expect(throws: TokenVerifier.Refusal.self) {
      try verifier.verify(token, now: Self.now).get()
    }
    #expect(refusal?.reason.contains("signature") == true)
  }

  @Test("a key set with no usable key is refused, and the keys before it stay")
  func unusableSet() async throws {
    let key = ES256PrivateKey()
    let verifier = try await Self.verifier(["k1": key])
    let unusable = try JSONSerialization.data(withJSONObject: [
      "keys": [["kty": "oct", "kid": "s1", "k": "c2VjcmV0"]]
    ])
    await #expect(throws: TokenVerifier.Refusal.self) { try await verifier.install(jwks: unusable) }
    #expect(verifier.keyIDs == ["k1"])
  }
}
