internal import Foundation
public import GRPCCore
public import RosterIdentity

/// Callers signed in by the company's OpenID Connect provider: the provider's tokens are
/// checked by `verifier`, and the values of their roles claim map to Roster's roles.
///
/// ```swift
/// let signIn = SignIn(
///   verifier: TokenVerifier(settings: .init(issuer: "https://id.example.com", audience: "roster")),
///   roles: ["directory-admins": .admin]
/// )
/// ```
public struct SignIn: Sendable {
  /// Checks the provider's tokens; the server keeps its keys current.
  public let verifier: TokenVerifier
  /// A claim value to the role it gives; values not named here give none, but a role's own
  /// name (`reader`, `writer`, `admin`) gives that role.
  public var roles: [String: Role]
  /// The role of a signed-in caller whose claim gives none: nil leaves such a caller only the
  /// open services.
  public var defaultRole: Role?
  /// The web console's client id at the provider, when people sign in to the console there
  /// (the authorization code flow with PKCE); nil: the console takes pasted tokens only.
  public var consoleClientID: String?
  /// The scopes the console asks the provider for: what makes the access token name Roster
  /// as its audience.
  public var consoleScope = Self.defaultConsoleScope

  /// The console's scopes by default: the person's identity and e-mail (their own record).
  public static let defaultConsoleScope = "openid email"

  /// The default role by default: every signed-in caller the provider issued a token for
  /// Roster may read.
  public static let defaultRoleName = "reader"

  public init(
    verifier: TokenVerifier,
    roles: [String: Role] = [:],
    defaultRole: Role? = Role(name: Self.defaultRoleName)
  ) {
    self.verifier = verifier
    self.roles = roles
    self.defaultRole = defaultRole
  }

  /// Whether `token` has a JSON Web Token's shape (three dot-separated parts), rather than a
  /// static token's.
  static func isSignedToken(_ token: Substring) -> Bool {
    token.utf8.lazy.filter { $0 == UInt8(ascii: ".") }.count == 2
  }

  /// The role, name (the issuer and the subject: the principal per-caller limits count by,
  /// and the author the change log records) and e-mail of a provider's token, or the error the
  /// caller gets.
  func holder(of token: Substring) throws -> (role: Role?, name: String, email: String?) {
    switch self.verifier.verify(token) {
    case .success(let claims):
      var role: Role? = nil
      for value in claims.roles {
        if let named = self.roles[value] ?? Role(name: value), role.map({ named > $0 }) ?? true {
          role = named
        }
      }
      return (role ?? self.defaultRole, claims.name, claims.email)
    case .failure(let refusal) where refusal.keysMissing:
      throw RPCError(code: .unavailable, message: "sign-in is not ready: \(refusal.reason)")
    case .failure(let refusal):
      throw RPCError(code: .unauthenticated, message: "the bearer token was refused: \(refusal)")
    }
  }
}
