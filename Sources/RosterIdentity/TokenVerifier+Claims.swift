internal import Foundation

extension TokenVerifier {
  /// The registered claims checked as RFC 7519 and OpenID Connect Core (section 3.1.3.7) say:
  /// `iss` is the issuer's, `aud` holds the audience, `exp` is required and not past, `nbf`
  /// and `iat` are not in the future, each by more than the clock skew; `sub` is required.
  func check(_ payload: [String: Any], at now: Double, skew: Double) -> Result<Claims, Refusal> {
    guard let issuer = payload["iss"] as? String, issuer == self.settings.issuer else {
      return .failure(.init(reason: "the token was not issued by \(self.settings.issuer)"))
    }
    let audiences = (payload["aud"] as? String).map { [$0] } ?? (payload["aud"] as? [String] ?? [])
    guard audiences.contains(self.settings.audience) else {
      return .failure(.init(reason: "the token's audience is not '\(self.settings.audience)'"))
    }
    guard let expires = Self.seconds(payload["exp"]) else {
      return .failure(.init(reason: "the token has no expiry (exp)"))
    }
    guard now <= expires + skew else { return .failure(.expired) }
    if let notBefore = Self.seconds(payload["nbf"]), now + skew < notBefore {
      return .failure(.init(reason: "the token is not valid yet (nbf)"))
    }
    if let issued = Self.seconds(payload["iat"]), now + skew < issued {
      return .failure(.init(reason: "the token was issued in the future (iat)"))
    }
    guard let subject = payload["sub"] as? String, !subject.isEmpty else {
      return .failure(.init(reason: "the token names no subject (sub)"))
    }
    return .success(
      Claims(
        issuer: issuer,
        subject: subject,
        // An address the provider says it has not verified is no one's own.
        email: payload["email_verified"] as? Bool == false ? nil : payload["email"] as? String,
        roles: Self.values(at: self.settings.rolesClaim, in: payload),
        expires: expires
      )
    )
  }

  /// The strings at a dotted claim path: one string, or an array's strings.
  static func values(at path: String, in payload: [String: Any]) -> [String] {
    var value: Any? = payload
    for name in path.split(separator: ".") {
      value = (value as? [String: Any])?[String(name)]
    }
    if let one = value as? String { return [one] }
    return (value as? [Any])?.compactMap { $0 as? String } ?? []
  }

  /// A NumericDate claim: seconds since 1970, an integer or not.
  private static func seconds(_ value: Any?) -> Double? {
    guard let number = value as? NSNumber, !(value is Bool) else { return nil }
    return number.doubleValue
  }

  /// Unpadded base64url (RFC 7515 section 2), through Foundation's base64.
  static func base64URL(_ text: Substring) -> [UInt8]? {
    var standard = String(text).replacingOccurrences(of: "-", with: "+")
      .replacingOccurrences(of: "_", with: "/")
    guard !standard.contains("=") else { return nil }
    standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
    return Data(base64Encoded: standard).map { Array($0) }
  }
}
