internal import Foundation
public import GRPCCore
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
///                         interceptors: [AuthorInterceptor()])
/// ```
public struct AuthorInterceptor: UnaryServerInterceptor {
  /// The metadata key clients set.
  public static let metadataKey = "x-roster-author"
  /// The longest author kept.
  public static let maximumLength = 200

  /// Creates the interceptor.
  public init() {}

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingServerRequest<Input>,
    context: ServerContext,
    next:
      @concurrent @Sendable (StreamingServerRequest<Input>, ServerContext) async throws
      -> StreamingServerResponse<Output>
  ) async throws -> StreamingServerResponse<Output> {
    let author = Self.author(in: request.metadata)
    var response = try await RequestAuthor.$current.withValue(author) {
      try await next(request, context)
    }
    // A streaming handler runs later, inside the response's producer: carry the author there.
    if case .success(var contents) = response.accepted {
      let producer = contents.producer
      contents.producer = { writer in
        try await RequestAuthor.$current.withValue(author) { try await producer(writer) }
      }
      response.accepted = .success(contents)
    }
    return response
  }

  public func interceptUnary<Output: Sendable>(
    metadata: Metadata,
    context: ServerContext,
    next: () async throws -> Output
  ) async throws -> Output {
    let author = Self.author(in: metadata)
    // Most calls name no author, which is the value already bound: binding it again would cost
    // a task-local record and three executor checks of the call's task.
    if author.isEmpty, RequestAuthor.current.isEmpty { return try await next() }
    return try await RequestAuthor.$current.withValue(author, operation: next)
  }

  public func interceptNow<Output>(
    metadata: Metadata,
    context: ServerContext,
    arrived: ContinuousClock.Instant,
    next: () throws -> Output
  ) throws -> Output {
    let author = Self.author(in: metadata)
    if author.isEmpty, RequestAuthor.current.isEmpty { return try next() }
    return try RequestAuthor.$current.withValue(author, operation: next)
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
