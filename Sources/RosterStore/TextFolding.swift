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
    return text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
      .lowercased()
  }

  /// A GLOB pattern that matches folded text containing `text`, with GLOB's special
  /// characters escaped so they match themselves.
  static func containsPattern(_ text: String) -> String {
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
