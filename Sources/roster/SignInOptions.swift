import ArgumentParser
import Foundation
import RosterIdentity
import RosterServer
import RosterServices

/// `roster serve`'s sign-in with the company's OpenID Connect provider: callers send the
/// provider's JSON Web Tokens as bearer tokens, beside the static tokens of `--tokens`.
struct SignInOptions: ParsableArguments {
  /// The verifier's defaults, which the flags show.
  static let defaults = TokenVerifier.Settings(issuer: "", audience: "")

  @Option(
    name: .customLong("oidc-issuer"),
    help: "Accept this OpenID Connect provider's tokens: its issuer URL (env ROSTER_OIDC_ISSUER)."
  )
  var issuer: String? = ProcessInfo.processInfo.environment["ROSTER_OIDC_ISSUER"]

  @Option(
    name: .customLong("oidc-audience"),
    help: "What the provider's tokens must hold in 'aud' (env ROSTER_OIDC_AUDIENCE)."
  )
  var audience: String? = ProcessInfo.processInfo.environment["ROSTER_OIDC_AUDIENCE"]

  @Option(
    name: .customLong("oidc-roles-claim"),
    help: "The claim naming a caller's roles or groups; dots walk into objects."
  )
  var rolesClaim: String = Self.defaults.rolesClaim

  @Option(
    name: .customLong("oidc-role"),
    help: "VALUE=ROLE: a value of the roles claim and the role it gives (repeat it)."
  )
  var roleMappings: [String] = []

  @Option(
    name: .customLong("oidc-default-role"),
    help:
      "The role of a signed-in caller whose claim gives none: reader, hr, writer, admin or none."
  )
  var defaultRole: String = SignIn.defaultRoleName

  @Option(
    name: .customLong("oidc-console-client-id"),
    help:
      "The web console's client id at the provider: people sign in to the console there (redirect URI: the console's URL)."
  )
  var consoleClientID: String?

  @Option(
    name: .customLong("oidc-console-scope"),
    help:
      "The scopes the console asks the provider for, which make its access token name --oidc-audience."
  )
  var consoleScope: String = SignIn.defaultConsoleScope

  @Option(
    name: .customLong("oidc-refresh-seconds"),
    help: "Fetch the provider's keys again after this many seconds."
  )
  var refreshSeconds: Int = Int(Self.defaults.refreshInterval.components.seconds)

  func validate() throws {
    _ = try self.signIn()
  }

  /// The sign-in these flags describe; nil without `--oidc-issuer`.
  func signIn() throws -> SignIn? {
    guard let issuer = self.issuer else {
      if self.audience != nil || self.consoleClientID != nil {
        throw ValidationError("--oidc-audience and --oidc-console-client-id need --oidc-issuer")
      }
      return nil
    }
    guard let audience = self.audience, !audience.isEmpty else {
      throw ValidationError("--oidc-issuer needs --oidc-audience (what its tokens name Roster)")
    }
    do {
      try SignIn.checkIssuer(issuer)
    } catch {
      throw ValidationError("--oidc-issuer \(issuer): \(error)")
    }
    guard self.refreshSeconds >= 10 else {
      throw ValidationError("--oidc-refresh-seconds must be at least 10")
    }
    var roles: [String: Role] = [:]
    for mapping in self.roleMappings {
      guard let equals = mapping.lastIndex(of: "="),
        let role = Role(name: String(mapping[mapping.index(after: equals)...]))
      else {
        throw ValidationError(
          "--oidc-role \(mapping): expected VALUE=ROLE, ROLE reader, hr, writer or admin"
        )
      }
      roles[String(mapping[..<equals])] = role
    }
    let defaultRole = Role(name: self.defaultRole)
    guard defaultRole != nil || self.defaultRole == "none" else {
      throw ValidationError("--oidc-default-role must be reader, hr, writer, admin or none")
    }
    var settings = TokenVerifier.Settings(issuer: issuer, audience: audience)
    settings.rolesClaim = self.rolesClaim
    settings.refreshInterval = .seconds(self.refreshSeconds)
    var signIn = SignIn(
      verifier: TokenVerifier(settings: settings),
      roles: roles,
      defaultRole: defaultRole
    )
    signIn.consoleClientID = self.consoleClientID
    signIn.consoleScope = self.consoleScope
    return signIn
  }
}
