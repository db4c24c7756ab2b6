internal import Foundation
internal import GRPCCore
internal import RosterDomain
internal import RosterStore

/// The author of the current request, from its `x-roster-author` metadata.
///
/// Set by `AuthorInterceptor` for the whole handler, streaming responses included, and read
/// by write handlers to tag the change log.
enum RequestAuthor {
  @TaskLocal static var current = ""

  /// The write context of the current request.
  static var writeContext: WriteContext {
    WriteContext(author: self.current)
  }
}

/// Reads `x-roster-author` from each request's metadata into `RequestAuthor.current`.
///
/// Values are trimmed and cut to 200 characters, so a client cannot bloat the change log.
///
/// ```swift
/// let server = GRPCServer(transport: transport, services: services,
///                         interceptors: [CallChain([AuthorInterceptor()])])
/// ```
public struct AuthorInterceptor: CallInterceptor {
  /// The metadata key clients set.
  public static let metadataKey = "x-roster-author"
  /// The longest author kept.
  public static let maximumLength = 200

  /// Creates the interceptor.
  public init() {}

  public func begin(_ call: inout CallScope) {
    call.author = Self.author(in: call.metadata)
  }

  /// The request's author, trimmed and cut to `maximumLength`; empty when it names none.
  private static func author(in metadata: Metadata) -> String {
    // Most calls name none: no trimming then (Foundation's `CharacterSet` is looked up each time).
    guard let value = metadata.firstString(Self.metadataKey), !value.isEmpty else { return "" }
    return String(value.trimmingCharacters(in: .whitespaces).prefix(Self.maximumLength))
  }
}

extension Metadata {
  /// The first string value under `key`, if any: what the interceptors read from a request.
  func firstString(_ key: String) -> String? {
    self[stringValues: key].first(where: { _ in true })
  }
}
