internal import Foundation

/// Folding of names for ordering and search: lower case, with diacritics removed.
///
/// The same function folds stored names and search text, so "NUÑ" finds "José Núñez".
public enum TextFolding {
  /// Folds `text` to lower case without diacritics ("José Núñez" becomes "jose nunez").
  public static func fold(_ text: String) -> String {
    if text.utf8.allSatisfy({ $0 < 0x80 }) {
      return text.lowercased()
    }
    let folded = text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
      .lowercased()
    guard folded.unicodeScalars.contains(where: { Self.letters[$0] != nil }) else { return folded }
    var out = String.UnicodeScalarView()
    for scalar in folded.unicodeScalars {
      if let replacement = Self.letters[scalar] {
        out.append(contentsOf: replacement.unicodeScalars)
      } else {
        out.append(scalar)
      }
    }
    return String(out)
  }

  /// Letters that Unicode does not decompose into a base letter and a mark, but that readers
  /// treat as accented forms ("Søren" is found by "soren").
  private static let letters: [Unicode.Scalar: String] = [
    "ø": "o", "ł": "l", "đ": "d", "ð": "d", "æ": "ae", "œ": "oe", "ß": "ss", "þ": "th",
    "ı": "i",
  ]

  /// A GLOB pattern that matches folded text containing `text`, with GLOB's special
  /// characters escaped so they match themselves.
  package static func containsPattern(_ text: String) -> String {
    var pattern = "*"
    for character in fold(text) {
      switch character {
      case "*", "?", "[", "]":
        pattern += "[\(character)]"
      default:
        pattern.append(character)
      }
    }
    pattern += "*"
    return pattern
  }
}
