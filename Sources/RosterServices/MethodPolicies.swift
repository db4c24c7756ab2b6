internal import Foundation
public import GRPCCore
internal import RosterProto
internal import SwiftProtobuf

/// What the server knows about each method, read once from the descriptors it was built with
/// (`RosterDescriptors`): whether the method streams, and, for Roster's own methods, the
/// `roster.v1.policy` option declared next to it in the `.proto` (`Protos/roster/v1/options.proto`).
/// Every table the server keeps by method (the roles, the lanes, what each call's interceptors
/// read, `MethodFacts`) is derived from here; none repeats a method.
public struct MethodPolicies: Sendable {
  /// Where a unary call's handler runs.
  public enum Lane: Sendable, Hashable {
    /// On its connection's event loop.
    case eventLoop
    /// On the cooperative pool.
    case pool
  }

  /// One method's facts.
  public struct Policy: Sendable, Hashable {
    /// Whether the client or the server sends a stream of messages.
    public var streams: Bool
    /// Whether a call changes nothing (`idempotency_level = NO_SIDE_EFFECTS`): the Connect
    /// protocol may then take it as a GET.
    public var readOnly: Bool
    /// The role declared, or nil when the method declares none.
    public var role: Role?
    /// Where a unary call's handler runs, or nil when the method declares none.
    public var lane: Lane?
    /// Whether each client's open calls count against the per-client cap.
    public var perClientStream: Bool
    /// Whether a signed-in caller without the role may call it on their own record.
    public var selfService: Bool = false
    /// Whether its reads must come from the primary even when the server has standbys.
    public var primaryReads: Bool = false

    /// Whether a call's reads may be served by a hot standby: it changes nothing, and does
    /// not follow the primary's commit order.
    public var standbyReads: Bool { self.readOnly && !self.primaryReads }
  }

  /// Every method of every service in the descriptors.
  public let byMethod: [MethodDescriptor: Policy]

  /// The paths (`/package.Service/Method`) of the methods whose policy matches `predicate`.
  public func paths(where predicate: (MethodDescriptor, Policy) -> Bool) -> Set<String> {
    Set(
      self.byMethod.filter { predicate($0.key, $0.value) }.keys.map {
        "/\($0.fullyQualifiedMethod)"
      }
    )
  }

  /// The server's methods, from the descriptors built into it.
  public static let server = MethodPolicies(Self.serverDescriptors)

  /// The descriptors built into the server, with Roster's options read: decoded once, for the
  /// methods' policies here and the fields' marks (`PersonalFields`).
  static let serverDescriptors: Google_Protobuf_FileDescriptorSet = {
    do {
      return try Google_Protobuf_FileDescriptorSet(
        serializedBytes: RosterDescriptors.fileDescriptorSet,
        extensions: Roster_V1_Options_Extensions
      )
    } catch {
      // The set is generated with the code (scripts/generate-protos): it decodes, or the
      // build is broken.
      preconditionFailure("RosterDescriptors.fileDescriptorSet does not decode: \(error)")
    }
  }()

  /// The policies in a serialized `google.protobuf.FileDescriptorSet`.
  init(fileDescriptorSet: Data) throws {
    let set = try Google_Protobuf_FileDescriptorSet(
      serializedBytes: fileDescriptorSet,
      extensions: Roster_V1_Options_Extensions
    )
    self.init(set)
  }

  init(_ set: Google_Protobuf_FileDescriptorSet) {
    var byMethod: [MethodDescriptor: Policy] = [:]
    for file in set.file {
      for service in file.service {
        let name = file.package.isEmpty ? service.name : "\(file.package).\(service.name)"
        for method in service.method {
          let declared = method.options.Roster_V1_policy
          let policy = Policy(
            streams: method.clientStreaming || method.serverStreaming,
            readOnly: method.options.idempotencyLevel == .noSideEffects,
            role: Self.role(declared.role),
            lane: Self.lane(declared.lane),
            perClientStream: declared.perClientStream,
            selfService: declared.selfService,
            primaryReads: declared.primaryReads
          )
          let type: MethodDescriptor.RPCType =
            switch (method.clientStreaming, method.serverStreaming) {
            case (false, false): .unary
            case (true, false): .clientStreaming
            case (false, true): .serverStreaming
            case (true, true): .bidirectionalStreaming
            }
          // As the generated descriptors are made, with the method's type (part of their
          // equality).
          let descriptor = MethodDescriptor(
            fullyQualifiedService: name,
            method: method.name,
            type: type
          )
          byMethod[descriptor] = policy
        }
      }
    }
    self.byMethod = byMethod
  }

  /// The methods of `services` whose policy is incomplete: no role, a unary method without a
  /// lane, or a streaming one with a lane; each with what it lacks.
  public func undeclared(in services: Set<String>) -> [String] {
    self.byMethod.compactMap { method, policy -> String? in
      guard services.contains(method.service.fullyQualifiedService) else { return nil }
      if policy.role == nil { return "\(method): no role" }
      if !policy.streams, policy.lane == nil { return "\(method): a unary method without a lane" }
      if policy.streams, policy.lane != nil { return "\(method): a streaming method with a lane" }
      return nil
    }.sorted()
  }

  private static func role(_ role: Roster_V1_Role) -> Role? {
    switch role {
    case .reader: .reader
    case .writer: .writer
    case .admin: .admin
    case .unspecified, .UNRECOGNIZED: nil
    }
  }

  private static func lane(_ lane: Roster_V1_Lane) -> Lane? {
    switch lane {
    case .eventLoop: .eventLoop
    case .pool: .pool
    case .unspecified, .UNRECOGNIZED: nil
    }
  }
}

/// What the interceptors read of a call's method, found once per call (`CallScope.method`)
/// rather than by each interceptor in a table of its own: each lookup hashes the method's names.
public struct MethodFacts: Sendable {
  /// The method's place among the server's methods, for tables kept by method; nil for a
  /// method outside the server's descriptors.
  public let index: Int?
  /// The role a call needs; nil for an open method (`Role.required(for:)`).
  public let required: Role?
  /// Whether the client or the server sends a stream of messages: the server's default
  /// deadline does not bound the call.
  public let streams: Bool
  /// Whether each client's open calls count against the per-client cap.
  public let perClientStream: Bool
  /// Whether a signed-in caller without the role may call it on their own record.
  public var selfService = false
  /// Whether the call's reads may be served by a hot standby (`Policy.standbyReads`).
  public var standbyReads = false

  /// The facts of `method`.
  public static func of(_ method: MethodDescriptor) -> MethodFacts {
    Self.server[method]
      ?? MethodFacts(
        index: nil,
        required: Self.required(method, declared: nil),
        streams: false,
        perClientStream: false
      )
  }

  /// The facts of every method in `MethodPolicies.server`.
  static let server: [MethodDescriptor: MethodFacts] = {
    let methods = MethodPolicies.server.byMethod.sorted {
      $0.key.fullyQualifiedMethod < $1.key.fullyQualifiedMethod
    }
    var facts: [MethodDescriptor: MethodFacts] = [:]
    for (index, (method, policy)) in methods.enumerated() {
      facts[method] = MethodFacts(
        index: index,
        required: Self.required(method, declared: policy.role),
        streams: policy.streams,
        perClientStream: policy.perClientStream,
        selfService: policy.selfService,
        standbyReads: policy.standbyReads
      )
    }
    return facts
  }()

  /// The services listed open need no role; a method of any other that declares none needs
  /// `admin`, so it is closed until someone decides.
  private static func required(_ method: MethodDescriptor, declared: Role?) -> Role? {
    if Role.openServices.contains(method.service.fullyQualifiedService) { return nil }
    return declared ?? .admin
  }
}
