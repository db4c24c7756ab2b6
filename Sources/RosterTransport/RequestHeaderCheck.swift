package import NIOHPACK

/// The checks RFC 9113 (§ 8.2, § 8.3) makes of a header block a client sends, as
/// swift-nio-http2 makes them (`HPACKHeaders+Validation.swift`, 1.46.0), in one pass over each
/// name's and value's bytes. Roster's transport turns swift-nio-http2's own check off: it ran on
/// the server's blocks too, and compared strings where bytes do (docs/performance.md, "What each
/// part saved"). `ConnectionManager` runs this one on every HEADERS frame a client
/// sends, before any handler reads it.
///
/// A block is malformed when:
/// - a name is empty, or has a byte that is not a lowercase `tchar` (RFC 9110 § 5.6.2);
/// - a pseudo-header follows a regular field, is unknown (`:status`, and `:protocol` since
///   extended CONNECT is not offered), appears twice, or is in trailers;
/// - a pseudo-header's value has a control byte, a space or DEL; a regular field's value a NUL,
///   CR or LF;
/// - a regular field is connection-specific (`connection`, `keep-alive`, `proxy-connection`,
///   `transfer-encoding`, `upgrade`), or a request's `te` is other than `trailers`;
/// - a request lacks `:method`, `:scheme` or `:path` (a `CONNECT` has `:method` and
///   `:authority` only), or its `:path` is empty.
package enum RequestHeaderCheck {
  package enum Block {
    /// The first block of a stream.
    case request
    /// A later block, which ends the stream.
    case trailers
  }

  private struct Pseudo: OptionSet {
    var rawValue: UInt8
    static let method = Pseudo(rawValue: 1 << 0)
    static let scheme = Pseudo(rawValue: 1 << 1)
    static let path = Pseudo(rawValue: 1 << 2)
    static let authority = Pseudo(rawValue: 1 << 3)
  }

  /// Whether `headers` are a well-formed block of the given kind.
  package static func isWellFormed(_ headers: HPACKHeaders, _ block: Block) -> Bool {
    var seen: Pseudo = []
    var regularSeen = false
    var isConnect = false
    for header in headers {
      let name = header.name
      let value = header.value
      guard let first = name.utf8.first else { return false }
      if first == UInt8(ascii: ":") {
        guard block == .request, !regularSeen else { return false }
        let pseudo: Pseudo
        switch name {
        case ":method":
          pseudo = .method
          isConnect = value == "CONNECT"
        case ":scheme": pseudo = .scheme
        case ":path":
          guard !value.isEmpty else { return false }
          pseudo = .path
        case ":authority": pseudo = .authority
        default: return false
        }
        guard !seen.contains(pseudo), Self.isPseudoValue(value) else { return false }
        seen.insert(pseudo)
      } else {
        regularSeen = true
        guard Self.isToken(name), Self.isFieldValue(value) else { return false }
        switch name.utf8.count {
        case 2:
          if block == .request, name == "te", value != "trailers" { return false }
        case 7, 10, 16, 17:
          switch name {
          case "connection", "transfer-encoding", "proxy-connection", "keep-alive", "upgrade":
            return false
          default:
            break
          }
        default:
          break
        }
      }
    }
    guard block == .request else { return true }
    if isConnect { return seen == [.method, .authority] }
    return seen.isSuperset(of: [.method, .scheme, .path])
  }

  /// A lowercase token: `tchar` without A-Z (RFC 9110 § 5.6.2; RFC 9113 § 8.2.1).
  private static func isToken(_ name: String) -> Bool {
    Self.allBytes(of: name) { byte in
      switch byte {
      case 0x21, 0x23 ... 0x27, 0x2a, 0x2b, 0x2d, 0x2e, 0x30 ... 0x39, 0x5e ... 0x7a, 0x7c, 0x7e:
        true
      default: false
      }
    }
  }

  /// No control byte, space or DEL, as swift-nio-http2 (a pseudo-header's value becomes an
  /// HTTP/1.1 request line's part).
  private static func isPseudoValue(_ value: String) -> Bool {
    Self.allBytes(of: value) { $0 > 0x20 && $0 != 0x7f }
  }

  /// No NUL, CR or LF (RFC 9113 § 8.2.1).
  private static func isFieldValue(_ value: String) -> Bool {
    Self.allBytes(of: value) { $0 != 0x00 && $0 != 0x0a && $0 != 0x0d }
  }

  @inline(__always)
  private static func allBytes(of string: String, _ isAllowed: (UInt8) -> Bool) -> Bool {
    if let answer = string.utf8.withContiguousStorageIfAvailable({ bytes in
      for byte in bytes where !isAllowed(byte) { return false }
      return true
    }) {
      return answer
    }
    return string.utf8.allSatisfy(isAllowed)
  }
}
