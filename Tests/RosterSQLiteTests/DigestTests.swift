import Testing

@testable import RosterDomain
@testable import RosterImaging
@testable import RosterSQLite

/// Picture etags and token hashes are SHA-256 in lowercase hex; clients compare them with
/// digests they compute themselves, so the bytes must be the standard ones.
@Suite("SHA-256", .timeLimit(.minutes(10)))
struct DigestTests {
  // FIPS 180-2's examples, and the digest of nothing.
  static let vectors: [(text: String, hex: String)] = [
    ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    ),
  ]

  @Test("the digest of known inputs is the standard one, in lowercase hex")
  func knownAnswers() {
    for (text, hex) in Self.vectors {
      #expect(Digest.sha256Hex(Array(text.utf8)) == hex, "\(text)")
    }
  }

  @Test("an upload's digest, fed in uneven chunks, equals the digest of the whole")
  func chunks() {
    let bytes = (0 ..< 100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    var hasher = SHA256Hasher()
    var start = 0
    for size in [1, 63, 64, 65, 4_096, 30_000] + Array(repeating: 65_536, count: 2) {
      let end = min(bytes.count, start + size)
      bytes[start ..< end].withUnsafeBytes { hasher.update($0) }
      start = end
    }
    #expect(start == bytes.count)
    #expect(hasher.finish() == Digest.sha256Hex(bytes))
    // A million 'a's, FIPS 180-2's long example, in 1,000-byte chunks.
    var long = SHA256Hasher()
    let thousand = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000)
    for _ in 0 ..< 1_000 { thousand.withUnsafeBytes { long.update($0) } }
    #expect(long.finish() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
  }
}
