internal import Crypto
public import Foundation
internal import JWTKit
internal import RosterLocks

/// Checks the JSON Web Tokens an OpenID Connect provider issues: the signature with the
/// provider's published keys (`install(jwks:)`), then issuer, audience and the token's times.
///
/// `verify` never suspends, so the call path can run it before any handler: a token checked
/// once is remembered (by its SHA-256) until it expires or the provider's keys change. Keys are
/// fetched by the server (`OIDCKeyRefresher`), which waits on `refetchRequested()`: a token
/// signed with a key id the set does not hold asks for a new fetch, at most once per
/// `Settings.refetchInterval`, so made-up key ids cannot make the server hammer the provider.
///
/// ```swift
/// let verifier = TokenVerifier(settings: .init(issuer: "https://id.example.com", audience: "roster"))
/// try await verifier.install(jwks: Data(jwksJSON.utf8))
/// switch verifier.verify(token) { case .success(let claims): ...; case .failure(let refusal): ... }
/// ```
public final class TokenVerifier: Sendable {
  /// What the deployment tells Roster about its provider.
  public struct Settings: Sendable {
    /// The provider's issuer URL, exactly as its tokens' `iss` claim and its discovery document
    /// name it.
    public var issuer: String
    /// What a token's `aud` claim must hold.
    public var audience: String
    /// The claim whose values name the caller's roles or groups; dots walk into objects
    /// (Keycloak's `realm_access.roles`).
    public var rolesClaim: String = "roles"
    /// How far apart the provider's clock and this server's may be.
    public var clockSkew: Duration = .seconds(60)
    /// How often the keys are fetched again when no token asks sooner.
    public var refreshInterval: Duration = .seconds(900)
    /// The shortest time between two fetches a token with an unknown key id asks for.
    public var refetchInterval: Duration = .seconds(5)

    /// The longest token looked at; longer ones are refused unread.
    public static let maximumTokenBytes = 16 * 1024
    /// The signature algorithms accepted: a token's `alg` must also be its key's.
    public static let algorithms: Set<String> = ["RS256", "ES256", "EdDSA"]

    public init(issuer: String, audience: String) {
      self.issuer = issuer
      self.audience = audience
    }
  }

  /// What a good token says about its caller: made once per token and remembered with it, so
  /// a call with a token checked before copies nothing.
  public final class Claims: Sendable {
    public let issuer: String
    public let subject: String
    /// The caller's name for logs and the change log: `ISSUER#SUBJECT`, unique across issuers.
    public let name: String
    /// The `email` claim, lower-cased, when the token carries one the provider has not marked
    /// unverified (`email_verified: false`).
    public let email: String?
    /// The values of `Settings.rolesClaim`.
    public let roles: [String]
    /// The `exp` claim, in seconds since 1970.
    public let expires: Double

    init(issuer: String, subject: String, email: String?, roles: [String], expires: Double) {
      self.issuer = issuer
      self.subject = subject
      self.name = "\(issuer)#\(subject)"
      self.email = email?.lowercased()
      self.roles = roles
      self.expires = expires
    }
  }

  /// Why a token was refused: the reason is for the caller and the log, and never holds the
  /// token.
  public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// True when the token may be good but its keys are not loaded yet (answer `UNAVAILABLE`).
    public var keysMissing = false
    public var reason: String
    public var description: String { self.reason }
  }

  public let settings: Settings
  private let state: Locked<State>
  private let refetches: AsyncStream<Void>
  private let refetchContinuation: AsyncStream<Void>.Continuation

  /// A verifier with no keys yet: every token is refused with `keysMissing` until the first
  /// `install(jwks:)`.
  public init(settings: Settings) {
    self.settings = settings
    self.state = Locked(State())
    (self.refetches, self.refetchContinuation) = AsyncStream.makeStream(
      bufferingPolicy: .bufferingNewest(1)
    )
  }

  /// Whether a key set has been installed.
  public var hasKeys: Bool { self.state.withLock { $0.loaded } }

  /// The key ids of the installed set, sorted.
  public var keyIDs: [String] { self.state.withLock { $0.keys.keys.sorted() } }

  /// Checks `token` against the installed keys and the settings at `now`.
  public func verify(_ token: Substring, now: Date = Date()) -> Result<Claims, Refusal> {
    let seconds = now.timeIntervalSince1970
    let skew = Double(self.settings.clockSkew.components.seconds)
    guard token.utf8.count <= Settings.maximumTokenBytes else {
      return .failure(.init(reason: "the token is longer than \(Settings.maximumTokenBytes) bytes"))
    }
    let digest =
      token.utf8.withContiguousStorageIfAvailable { SHA256.hash(data: $0) }
      ?? SHA256.hash(data: Array(token.utf8))
    if let remembered = self.state.withLock({ $0.remembered(digest) }) {
      guard seconds <= remembered.expires + skew else { return .failure(.expired) }
      return .success(remembered)
    }
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3,
      let headerBytes = Self.base64URL(parts[0]),
      let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any]
    else { return .failure(.init(reason: "the token is not a signed JSON Web Token")) }
    guard let algorithm = header["alg"] as? String, Settings.algorithms.contains(algorithm) else {
      let named = (header["alg"] as? String).map { "'\($0.prefix(20))'" } ?? "none"
      return .failure(
        .init(reason: "the token's alg \(named) is not accepted (RS256, ES256 or EdDSA)")
      )
    }
    let keyID = header["kid"] as? String
    let found = self.state.withLock { $0.key(keyID) }
    let key: Key
    switch found {
    case .notLoaded:
      return .failure(
        .init(keysMissing: true, reason: "the identity provider's keys are not loaded yet")
      )
    case .unknown:
      self.askForRefetch()
      let named = keyID.map { "key id '\($0.prefix(64))'" } ?? "no key id"
      return .failure(.init(reason: "the token names \(named), which the issuer does not publish"))
    case .found(let match):
      key = match
    }
    guard key.algorithm == algorithm else {
      return .failure(
        .init(reason: "the token's alg \(algorithm) is not its key's (\(key.algorithm))")
      )
    }
    let signed = token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)
    guard let signature = Self.base64URL(parts[2]),
      (try? key.verifier.verify(signature, signs: Array(signed))) == true
    else { return .failure(.init(reason: "the token's signature does not match its key")) }
    guard let payloadBytes = Self.base64URL(parts[1]),
      let payload = try? JSONSerialization.jsonObject(with: Data(payloadBytes)) as? [String: Any]
    else { return .failure(.init(reason: "the token's claims are not a JSON object")) }
    let claims: Claims
    switch self.check(payload, at: seconds, skew: skew) {
    case .success(let checked): claims = checked
    case .failure(let refusal): return .failure(refusal)
    }
    self.state.withLock { $0.remember(digest, claims, kid: key.kid, generation: key.generation) }
    return .success(claims)
  }

  /// Replaces the key set with a JSON Web Key Set's signing keys (RS256, ES256, EdDSA; other
  /// keys are skipped). Tokens remembered under keys that changed are checked again.
  ///
  /// - Returns: the key ids installed.
  /// - Throws: when the text is not a key set, or holds no key Roster can use.
  @discardableResult
  public func install(jwks: Data) async throws -> [String] {
    guard let set = try? JSONSerialization.jsonObject(with: jwks) as? [String: Any],
      let published = set["keys"] as? [Any]
    else { throw Refusal(reason: "the key set is not a JSON object with a 'keys' array") }
    var keys: [String: State.Installed] = [:]
    for entry in published {
      // A key for encryption, or of a type or curve JWTKit does not read, is skipped alone.
      guard let object = entry as? [String: Any], (object["use"] as? String) != "enc",
        object["d"] == nil,
        let text = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
        let jwk = try? JSONDecoder().decode(JWK.self, from: text),
        let kid = jwk.keyIdentifier, let algorithm = Self.algorithm(of: jwk)
      else { continue }
      let collection = JWTKeyCollection()
      guard (try? await collection.add(jwk: jwk)) != nil,
        let verifier = try? await collection.getKey(for: kid, alg: algorithm)
      else { continue }
      keys[kid.string] = State.Installed(algorithm: algorithm, verifier: verifier, text: text)
    }
    guard !keys.isEmpty else {
      throw Refusal(reason: "the key set holds no RS256, ES256 or EdDSA signing key with a kid")
    }
    self.state.withLock { $0.install(keys) }
    return keys.keys.sorted()
  }

  /// Returns when a token has asked for the keys to be fetched again, or after `timeout`.
  public func refetchRequested(within timeout: Duration) async {
    await withTaskGroup(of: Void.self) { group in
      group.addTask {
        var requests = self.refetches.makeAsyncIterator()
        _ = await requests.next()
      }
      group.addTask { try? await Task.sleep(for: timeout) }
      _ = await group.next()
      group.cancelAll()
    }
  }

  private func askForRefetch() {
    let now = ContinuousClock.now
    let due = self.state.withLock { state -> Bool in
      if let last = state.lastRefetchRequest, now - last < self.settings.refetchInterval {
        return false
      }
      state.lastRefetchRequest = now
      return true
    }
    if due { self.refetchContinuation.yield() }
  }

  private static func algorithm(of jwk: JWK) -> String? {
    if let named = jwk.algorithm?.rawValue {
      return Settings.algorithms.contains(named) ? named : nil
    }
    switch (jwk.keyType, jwk.curve) {
    case (.rsa, _): return "RS256"
    case (.ecdsa, .some(.ecdsa(.p256))): return "ES256"
    case (.octetKeyPair, .some(.eddsa(.ed25519))): return "EdDSA"
    default: return nil
    }
  }
}

extension TokenVerifier.Refusal {
  static let expired = Self(reason: "the token has expired")
}
