/// Text a client sent, as an error message quotes it: in single quotes, cut to its first
/// `ClientText.limit` characters with "…" after them. A status names what was wrong without
/// echoing a request's megabytes back (every reply is bounded, errors included).
public enum ClientText {
  /// The most characters of client text one message quotes.
  public static let limit = 64

  /// `text` in single quotes, cut to `limit` characters.
  public static func quoted(_ text: some StringProtocol) -> String {
    "'" + Self.excerpt(text) + "'"
  }

  /// `text` cut to `limit` characters, with "…" when it was longer.
  public static func excerpt(_ text: some StringProtocol) -> String {
    var end = text.startIndex
    guard text.formIndex(&end, offsetBy: Self.limit, limitedBy: text.endIndex) else {
      return String(text)
    }
    return end == text.endIndex ? String(text) : String(text[..<end]) + "…"
  }
}
