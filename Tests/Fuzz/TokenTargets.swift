import Foundation
import RosterDomain

@testable import RosterServices

/// The opaque tokens clients send back: page tokens (and the base64url under them) and
/// change tokens.
enum TokenTargets {
  /// What must hold: any text is a token or not, without a crash; a token decoded from any
  /// text encodes to one that decodes to the same; a token made from the input's values
  /// decodes to them; base64url round-trips and agrees with Foundation's base64.
  static func tokens(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let text = String(decoding: input.field(until: 0), as: UTF8.self)
    if let token = PageToken(decoding: text) {
      require(PageToken(decoding: token.encoded()) == token, "a decoded token did not round-trip")
    }
    if let sequence = try? DirectoryRequests.changeToken(text, now: 7) {
      require(sequence >= 0, "change token \(sequence) from '\(text)'")
    }

    var fingerprint: UInt64 = 0
    var id: Int64 = 0
    for _ in 0 ..< 8 {
      fingerprint = fingerprint << 8 | UInt64(input.byte())
      id = id << 8 | Int64(input.byte())
    }
    var keys: [String] = []
    for _ in 0 ..< input.choice(4) {
      keys.append(String(decoding: input.field(until: 0), as: UTF8.self))
    }
    let made = PageToken(fingerprint: fingerprint, cursor: EmployeeCursor(keys: keys, id: id))
    require(PageToken(decoding: made.encoded()) == made, "a made token did not round-trip")

    let rest = Array(input.rest())
    let encoded = Base64URL.encode(rest)
    require(Base64URL.decode(encoded) == rest, "base64url did not round-trip")
    let standard = Data(rest).base64EncodedString()
      .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
    require(encoded == standard, "base64url \(encoded), Foundation \(standard)")
  }
}
