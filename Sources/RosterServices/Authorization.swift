internal import Crypto
internal import Foundation
public import GRPCCore
internal import RosterDomain
internal import RosterProto
internal import RosterStore

/// What a token may do. Each role includes the ones before it, but for personal fields, which
/// only `hr` and `admin` see (`seesPersonalFields`).
public enum Role: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
  /// Reads: gets, lists, streams, pictures, analytics, the change feed.
  case reader
  /// A reader who also sees everyone's personal fields (those the `.proto` marks
  /// `roster.v1.personal`).
  case hr
  /// Single writes, uploads and imports.
  case writer
  /// Bulk changes and deletes: `BatchUpdateEmployees`, `DeleteEmployees`, `DeleteSales`,
  /// `DeletePicture`.
  case admin

  public init?(name: String) {
    guard let role = Self.allCases.first(where: { $0.description == name }) else { return nil }
    self = role
  }

  public var description: String {
    switch self {
    case .reader: "reader"
    case .hr: "hr"
    case .writer: "writer"
    case .admin: "admin"
    }
  }

  public static func < (lhs: Role, rhs: Role) -> Bool { lhs.rawValue < rhs.rawValue }

  /// Whether this role sees every employee's personal fields.
  public var seesPersonalFields: Bool { self == .hr || self == .admin }

  /// Services anyone may call: probes and discovery. Every other method needs the role its
  /// `roster.v1.policy` in the `.proto` declares (`MethodFacts`), or `admin` when it declares
  /// none, so it is closed until someone decides.
  static let openServices: Set<String> = [
    "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
  ]

  /// The role `method` needs, or nil when it is open.
  public static func required(for method: MethodDescriptor) -> Role? {
    MethodFacts.of(method).required
  }
}

/// The API tokens a server accepts: SHA-256 hashes of the tokens, each with a role. The
/// tokens themselves are never stored, and never logged.
///
/// The file format (`--tokens FILE`): one token per line, `ROLE SHA256-HEX [LABEL]`; blank
/// lines and lines starting with `#` are skipped. `roster token --role ROLE` prints a new
/// token and its line.
public struct TokenTable: Sendable {
  struct Entry: Sendable {
    var digest: [UInt8]
    var role: Role
    var label: String
    /// Who holds the token, for per-client limits: the digest's first 8 bytes in hex, made once
    /// here rather than on every call.
    var principal: String

    init(digest: [UInt8], role: Role, label: String) {
      self.digest = digest
      self.role = role
      self.label = label
      self.principal = digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }
  }

  private let entries: [Entry]

  /// How many tokens the table holds.
  public var count: Int { self.entries.count }

  /// Parses the text of a tokens file.
  ///
  /// - Throws: `TokenTable.FormatError` naming the first bad line.
  public init(parsing text: String) throws {
    var entries: [Entry] = []
    for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
    {
      let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
      guard let first = fields.first, !first.hasPrefix("#") else { continue }
      guard fields.count >= 2, let role = Role(name: String(first)),
        let digest = Self.bytes(hex: fields[1]), digest.count == 32
      else {
        throw FormatError(
          message:
            "line \(number + 1): expected ROLE SHA256-HEX [LABEL], with ROLE reader, hr, writer or admin"
        )
      }
      entries.append(
        Entry(digest: digest, role: role, label: fields.dropFirst(2).joined(separator: " "))
      )
    }
    self.entries = entries
  }

  /// Reads and parses a tokens file.
  public init(contentsOfFile path: String) throws {
    try self.init(parsing: try String(contentsOfFile: path, encoding: .utf8))
  }

  /// A bad tokens file.
  public struct FormatError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { self.message }
  }

  /// The role of `token`, or nil if the table does not hold it. Every entry is compared,
  /// each in constant time, so the time taken says nothing about which bytes matched.
  public func role(of token: String) -> Role? {
    self.holder(of: token)?.role
  }

  /// The role of `token`, who holds it (`Principal`: the first 8 bytes of its entry's
  /// SHA-256, in hex, which says nothing of the token) and its label, or nil if the table does
  /// not hold it. Constant time per entry, as `role(of:)`.
  public func holder(of token: String) -> (role: Role, principal: String, label: String)? {
    let digest = Self.digest(token)
    var found: Entry? = nil
    for entry in self.entries {
      var difference: UInt8 = 0
      for index in 0 ..< 32 { difference |= entry.digest[index] ^ digest[index] }
      if difference == 0 { found = entry }
    }
    guard let found else { return nil }
    return (found.role, found.principal, found.label)
  }

  /// A new random token (256 bits, URL-safe base64) and its tokens-file line.
  public static func makeToken(role: Role, label: String = "") -> (token: String, line: String) {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0 ..< 32).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }
    let token = "rst_" + Base64URL.encode(bytes)
    let line = "\(role) \(Self.sha256Hex(token))" + (label.isEmpty ? "" : " \(label)")
    return (token, line)
  }

  /// The lowercase hex SHA-256 of a token, as the tokens file holds it.
  static func sha256Hex(_ token: String) -> String {
    SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
  }

  static func digest(_ token: String) -> [UInt8] {
    Array(SHA256.hash(data: Array(token.utf8)))
  }

  private static func bytes(hex: Substring) -> [UInt8]? {
    guard hex.utf8.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    var high: UInt8? = nil
    for character in hex.utf8 {
      let value: UInt8
      switch character {
      case UInt8(ascii: "0") ... UInt8(ascii: "9"): value = character - UInt8(ascii: "0")
      case UInt8(ascii: "a") ... UInt8(ascii: "f"): value = character - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A") ... UInt8(ascii: "F"): value = character - UInt8(ascii: "A") + 10
      default: return nil
      }
      if let first = high {
        bytes.append(first << 4 | value)
        high = nil
      } else {
        high = value
      }
    }
    return bytes
  }
}

/// Checks the bearer token of every call against the role its method needs: a static token
/// of the tokens file, or a JSON Web Token of the company's identity provider (`SignIn`).
///
/// No `authorization` metadata, or a token neither knows → `UNAUTHENTICATED` (for a provider's
/// token, with the reason: expired, wrong audience); a role too low → `PERMISSION_DENIED`.
/// Health and reflection are open. The token never appears in a status message or a log.
public struct AuthInterceptor: CallInterceptor {
  /// The metadata key, as HTTP's.
  public static let metadataKey = "authorization"
  private let tokens: TokenTable?
  private let signIn: SignIn?

  /// Checks calls against `tokens` and, when set, the provider's tokens through `signIn`.
  public init(tokens: TokenTable?, signIn: SignIn? = nil) {
    self.tokens = tokens
    self.signIn = signIn
  }

  public func begin(_ call: inout CallScope) throws {
    if let (principal, author, caller) = try self.holder(of: call) {
      call.principal = principal
      call.authenticatedAuthor = author
      call.caller = caller
    }
  }

  /// The principal, the author and the caller of a call's token, checked against the role its
  /// method needs; nil for the open methods, which need none.
  private func holder(of call: CallScope) throws -> (String, String, Caller)? {
    guard let needed = call.method.required else { return nil }
    let method = call.context.descriptor.method
    let metadata = call.metadata
    guard let header = metadata.firstString(Self.metadataKey),
      header.count > 7, header.prefix(7).lowercased() == "bearer "
    else {
      throw RPCError(
        code: .unauthenticated,
        message: "\(method) needs a bearer token in the 'authorization' metadata"
      )
    }
    let token = Self.trimmed(header.dropFirst(7))
    let role: Role?
    let principal: String
    let author: String
    var email: String? = nil
    // A service's static token may say whom it acts for; a person signed in, only as an admin.
    var service = false
    if let signIn = self.signIn, SignIn.isSignedToken(token[...]) {
      (role, principal, email) = try signIn.holder(of: token[...])
      author = principal
    } else if let (held, holder, label) = self.tokens?.holder(of: token) {
      (role, principal, service) = (held, holder, true)
      author = "token:" + (label.isEmpty ? holder : label)
    } else {
      throw RPCError(
        code: .unauthenticated,
        message: "the bearer token is not known to this server"
      )
    }
    if call.method.selfService, email != nil, role.map({ $0 < needed }) ?? true {
      // The handler checks that the call changes only the caller's own record.
      return (principal, author, Caller(role: role, email: email, ownRecordOnly: true))
    }
    guard let role, role >= needed else {
      throw RPCError(
        code: .permissionDenied,
        message: "\(method) needs the \(needed) role; this token has "
          + (role.map { "the \($0) role" } ?? "no role")
      )
    }
    let caller = Caller(role: role, email: email, mayActOnBehalf: service || role == .admin)
    return (principal, author, caller)
  }
}

extension AuthInterceptor {
  /// `text` without the spaces and tabs around it.
  static func trimmed(_ text: Substring) -> String {
    let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
    let utf8 = text.utf8
    guard let first = utf8.firstIndex(where: { !blank($0) }),
      let last = utf8.lastIndex(where: { !blank($0) })
    else { return "" }
    return String(Substring(utf8[first ... last]))
  }
}

/// Who makes the current call, once `AuthInterceptor` has checked its token: the token's
/// principal (`TokenTable.holder(of:)`); nil without tokens, or for the open services. The
/// interceptors after it count per-client limits by it.
public enum Principal {
  @TaskLocal public static var current: String?
}

/// Adds `authorization: Bearer TOKEN` to every call of a client: what `roster`'s client
/// subcommands use with `--token`.
public struct BearerTokenInterceptor: ClientInterceptor {
  private let token: String

  /// Sends `token` with every call.
  public init(token: String) {
    self.token = token
  }

  public func intercept<Input: Sendable, Output: Sendable>(
    request: StreamingClientRequest<Input>,
    context: ClientContext,
    next:
      @concurrent (StreamingClientRequest<Input>, ClientContext) async throws ->
      StreamingClientResponse<Output>
  ) async throws -> StreamingClientResponse<Output> {
    var request = request
    request.metadata.replaceOrAddString("Bearer \(self.token)", forKey: AuthInterceptor.metadataKey)
    return try await next(request, context)
  }
}
