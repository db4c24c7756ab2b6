internal import Foundation
internal import GRPCCore
internal import RosterDomain
internal import RosterStore

/// The author of the current request, and whom they act for.
///
/// Set by `AuthorInterceptor` for the whole handler, streaming responses included, and read
/// by write handlers to tag the change log.
enum RequestAuthor {
  @TaskLocal static var current = ""
  @TaskLocal static var onBehalfOf = ""

  /// The write context of the current request.
  static var writeContext: WriteContext {
    WriteContext(author: self.current, onBehalfOf: self.onBehalfOf)
  }
}

/// Sets each request's author: the authenticated principal when the server checks tokens
/// (`AuthInterceptor`), with `x-roster-author` recorded beside it as whom the principal acts
/// for, when its role allows it (`Caller.mayActOnBehalf`); `x-roster-author` itself on a server
/// without tokens, where it is all there is to know.
///
/// Values are trimmed and cut to 200 characters, so a client cannot bloat the change log. A
/// caller whose role does not allow acting for another that names one is refused with
/// `PERMISSION_DENIED`: a change must not seem made for someone it was not.
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

  public func begin(_ call: inout CallScope) throws {
    let named = Self.author(in: call.metadata)
    guard let authenticated = call.authenticatedAuthor else {
      call.author = named
      return
    }
    call.author = authenticated
    guard !named.isEmpty else { return }
    guard call.caller?.mayActOnBehalf == true else {
      throw RPCError(
        code: .permissionDenied,
        message: "\(Self.metadataKey): only a service's static token or the admin role may "
          + "act on behalf of someone; changes are recorded under the caller's own sign-in"
      )
    }
    call.onBehalfOf = named
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
