import Foundation
import RosterDomain
import Testing

@testable import RosterServices

/// The page-token and API-token alphabet: the same text Foundation's base64 gives with the
/// URL-safe substitutions and no padding, and back.
@Suite("Base64url", .timeLimit(.minutes(10)))
struct Base64URLTests {
  /// Foundation's base64, made URL-safe and unpadded: what tokens were before.
  static func reference(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
      .replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  @Test("every length from 0 to 70 bytes encodes as Foundation does, and decodes back")
  func matchesFoundation() {
    var generator = SplitMix64(seed: 0x5EED)
    for length in 0 ... 70 {
      for _ in 0 ..< 20 {
        let bytes = (0 ..< length).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }
        let text = Base64URL.encode(bytes)
        #expect(text == Self.reference(bytes), "\(bytes)")
        #expect(Base64URL.decode(text) == bytes, "\(text)")
      }
    }
    // Every byte value, so every character of the alphabet, appears.
    let all = (0 ... 255).map(UInt8.init)
    #expect(Base64URL.encode(all) == Self.reference(all))
    #expect(Base64URL.decode(Base64URL.encode(all)) == all)
  }

  @Test(
    "text no encoder makes is refused",
    arguments: [
      "A", "AAAAA",  // a length of 4n + 1
      "AB+C", "AB/C", "ABC=", "AB==", "AB C", "ABé",  // outside the alphabet, padding
      "AB", "AAB", "AAAAAB",  // leftover bits that are not zero
    ]
  )
  func refusesOtherText(_ text: String) {
    #expect(Base64URL.decode(text) == nil)
  }

  @Test("the shortest texts decode")
  func shortest() {
    #expect(Base64URL.decode("") == [])
    #expect(Base64URL.decode("AA") == [0])
    #expect(Base64URL.decode("_w") == [0xFF])
    #expect(Base64URL.decode("__8") == [0xFF, 0xFF])
  }

  @Test("nothing encodes to nothing, in either alphabet")
  func empty() {
    #expect(Base64URL.encode([]) == "")
    var out: [UInt8] = []
    [UInt8]().withUnsafeBufferPointer { Base64URL.append($0, standard: true, to: &out) }
    #expect(out.isEmpty)
  }
}
