internal import Crypto
internal import Foundation
internal import JWTKit

extension TokenVerifier {
  /// A key of the installed set, with the generation of the set that last changed it.
  struct Key: Sendable {
    var kid: String
    var algorithm: String
    var verifier: any JWTAlgorithm
    var generation: Int
  }

  enum Lookup {
    case notLoaded
    case unknown
    case found(Key)
  }

  /// The keys, and the tokens already checked, behind the verifier's lock.
  struct State: Sendable {
    struct Installed: Sendable {
      var algorithm: String
      var verifier: any JWTAlgorithm
      /// The key's JSON Web Key, its keys sorted: a key id whose key changed is a new key.
      var text: Data
    }

    private struct Remembered: Sendable {
      var claims: Claims
      var kid: String
      var generation: Int
    }

    /// The most tokens remembered; past it, the expired ones go, and if none has, all of them.
    static let rememberedLimit = 10_000

    private(set) var loaded = false
    private(set) var keys: [String: (installed: Installed, generation: Int)] = [:]
    private var generation = 0
    private var tokens: [SHA256Digest: Remembered] = [:]
    var lastRefetchRequest: ContinuousClock.Instant?

    func key(_ kid: String?) -> Lookup {
      guard self.loaded else { return .notLoaded }
      // A provider with one key may leave `kid` out of its tokens.
      guard let kid = kid ?? (self.keys.count == 1 ? self.keys.keys.first : nil),
        let entry = self.keys[kid]
      else { return .unknown }
      return .found(
        Key(
          kid: kid,
          algorithm: entry.installed.algorithm,
          verifier: entry.installed.verifier,
          generation: entry.generation
        )
      )
    }

    /// The claims of a token checked before under a key the set still holds unchanged.
    func remembered(_ digest: SHA256Digest) -> Claims? {
      guard let entry = self.tokens[digest], self.keys[entry.kid]?.generation == entry.generation
      else { return nil }
      return entry.claims
    }

    mutating func remember(_ digest: SHA256Digest, _ claims: Claims, kid: String, generation: Int) {
      if self.tokens.count >= Self.rememberedLimit {
        let now = Date().timeIntervalSince1970
        self.tokens = self.tokens.filter { $0.value.claims.expires > now }
        if self.tokens.count >= Self.rememberedLimit { self.tokens.removeAll() }
      }
      self.tokens[digest] = Remembered(claims: claims, kid: kid, generation: generation)
    }

    mutating func install(_ installed: [String: Installed]) {
      self.generation += 1
      var keys: [String: (installed: Installed, generation: Int)] = [:]
      for (kid, key) in installed {
        // An unchanged key keeps its generation, so the tokens it signed stay remembered.
        if let old = self.keys[kid], old.installed.text == key.text {
          keys[kid] = (key, old.generation)
        } else {
          keys[kid] = (key, self.generation)
        }
      }
      self.keys = keys
      self.tokens = self.tokens.filter { keys[$0.value.kid]?.generation == $0.value.generation }
      self.loaded = true
    }
  }
}
