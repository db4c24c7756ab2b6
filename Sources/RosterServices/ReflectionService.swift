public import Foundation
public import GRPCCore
internal import RosterDomain
public import RosterProto
internal import SwiftProtobuf

/// `grpc.reflection.v1.ServerReflection` and its older twin `v1alpha`, so stock tools
/// (grpcurl, evans, Postman, Python's `grpcio-reflection`) can list the services and fetch
/// their descriptors with no `.proto` files at hand.
///
/// It answers from the `FileDescriptorSet` that `scripts/generate-protos` embeds in
/// `RosterProto` (`RosterDescriptors`). A file comes back with every file it imports, so one
/// answer is enough to build the descriptor pool.
///
/// ```swift
/// let reflection = try ReflectionService()
/// let services: [any RegistrableRPCService] = [directory, reflection, reflection.v1alpha]
/// ```
public struct ReflectionService: Sendable {
  private let index: DescriptorIndex

  /// Indexes the embedded descriptor set.
  ///
  /// - Throws: if the embedded set does not parse, which a test rules out.
  public init(descriptorSet: Data = RosterDescriptors.fileDescriptorSet) throws {
    self.index = try DescriptorIndex(serializedSet: descriptorSet)
  }

  /// The same answers under `grpc.reflection.v1alpha`.
  public var v1alpha: ReflectionServiceV1Alpha {
    ReflectionServiceV1Alpha(v1: self)
  }

  /// The fully qualified names of every service the descriptors define, sorted.
  public var serviceNames: [String] {
    self.index.services
  }

  /// Answers one request.
  func answer(
    _ request: Grpc_Reflection_V1_ServerReflectionRequest
  ) -> Grpc_Reflection_V1_ServerReflectionResponse {
    var response = Grpc_Reflection_V1_ServerReflectionResponse()
    response.validHost = request.host
    response.originalRequest = request
    func files(_ name: String?, _ what: String) {
      if let name, let files = self.index.fileWithDependencies(name) {
        response.fileDescriptorResponse = .with { $0.fileDescriptorProto = files }
      } else {
        response.errorResponse = .with {
          $0.errorCode = Int32(RPCError.Code.notFound.rawValue)
          $0.errorMessage = what
        }
      }
    }
    switch request.messageRequest {
    case .fileByFilename(let name):
      files(name, "no file named \(ClientText.quoted(name))")
    case .fileContainingSymbol(let symbol):
      files(self.index.fileDefining(symbol), "no symbol named \(ClientText.quoted(symbol))")
    case .fileContainingExtension(let extensionRequest):
      // No Roster proto declares extensions.
      files(
        nil,
        "no extension \(extensionRequest.extensionNumber) of \(ClientText.quoted(extensionRequest.containingType))"
      )
    case .allExtensionNumbersOfType(let type):
      if self.index.isMessage(type) {
        response.allExtensionNumbersResponse = .with { $0.baseTypeName = type }
      } else {
        files(nil, "no message type named \(ClientText.quoted(type))")
      }
    case .listServices:
      response.listServicesResponse = .with {
        $0.service = self.index.services.map { name in .with { $0.name = name } }
      }
    case nil:
      response.errorResponse = .with {
        $0.errorCode = Int32(RPCError.Code.invalidArgument.rawValue)
        $0.errorMessage = "message_request is not set"
      }
    }
    return response
  }
}

extension ReflectionService: Grpc_Reflection_V1_ServerReflection.SimpleServiceProtocol {
  /// Answers each request of the stream in order, until the client half-closes.
  public func serverReflectionInfo(
    request: RPCAsyncSequence<Grpc_Reflection_V1_ServerReflectionRequest, any Error>,
    response: RPCWriter<Grpc_Reflection_V1_ServerReflectionResponse>,
    context: ServerContext
  ) async throws {
    for try await message in request {
      try await response.write(self.answer(message))
    }
  }
}

/// `grpc.reflection.v1alpha.ServerReflection`: the v1 answers, moved across by their wire
/// bytes, which the two versions share.
public struct ReflectionServiceV1Alpha: Grpc_Reflection_V1alpha_ServerReflection
    .SimpleServiceProtocol
{
  let v1: ReflectionService

  /// Answers each request of the stream in order, until the client half-closes.
  public func serverReflectionInfo(
    request: RPCAsyncSequence<Grpc_Reflection_V1alpha_ServerReflectionRequest, any Error>,
    response: RPCWriter<Grpc_Reflection_V1alpha_ServerReflectionResponse>,
    context: ServerContext
  ) async throws {
    for try await message in request {
      let question = try Grpc_Reflection_V1_ServerReflectionRequest(
        serializedBytes: try message.serializedBytes() as [UInt8]
      )
      let answer = self.v1.answer(question)
      try await response.write(
        try Grpc_Reflection_V1alpha_ServerReflectionResponse(
          serializedBytes: try answer.serializedBytes() as [UInt8]
        )
      )
    }
  }
}

/// Which file defines which symbol, and each file's serialized descriptor.
struct DescriptorIndex: Sendable {
  /// Serialized `FileDescriptorProto` by file name.
  private var files: [String: Data] = [:]
  /// Direct imports by file name.
  private var imports: [String: [String]] = [:]
  /// Defining file by fully qualified symbol: packages' messages (nested too), enums,
  /// services and methods (`package.Service.Method`).
  private var symbols: [String: String] = [:]
  private var messages: Set<String> = []
  /// Fully qualified service names, sorted.
  private(set) var services: [String] = []

  init(serializedSet: Data) throws {
    let set = try Google_Protobuf_FileDescriptorSet(serializedBytes: serializedSet)
    for file in set.file {
      self.files[file.name] = try file.serializedBytes()
      self.imports[file.name] = file.dependency
      let prefix = file.package.isEmpty ? "" : file.package + "."
      func addMessages(_ messages: [Google_Protobuf_DescriptorProto], in scope: String) {
        for message in messages {
          let name = scope + message.name
          self.symbols[name] = file.name
          self.messages.insert(name)
          for enumeration in message.enumType {
            self.symbols[name + "." + enumeration.name] = file.name
          }
          addMessages(message.nestedType, in: name + ".")
        }
      }
      addMessages(file.messageType, in: prefix)
      for enumeration in file.enumType { self.symbols[prefix + enumeration.name] = file.name }
      for service in file.service {
        let name = prefix + service.name
        self.symbols[name] = file.name
        self.services.append(name)
        for method in service.method { self.symbols[name + "." + method.name] = file.name }
      }
    }
    self.services.sort()
  }

  func fileDefining(_ symbol: String) -> String? {
    // Tools sometimes send a leading dot, as in descriptor type names.
    self.symbols[symbol.hasPrefix(".") ? String(symbol.dropFirst()) : symbol]
  }

  func isMessage(_ name: String) -> Bool {
    self.messages.contains(name.hasPrefix(".") ? String(name.dropFirst()) : name)
  }

  /// The file, then everything it imports, transitively, each once.
  func fileWithDependencies(_ name: String) -> [Data]? {
    guard self.files[name] != nil else { return nil }
    var order: [String] = []
    var seen: Set<String> = []
    var pending = [name]
    while let next = pending.first {
      pending.removeFirst()
      guard seen.insert(next).inserted else { continue }
      order.append(next)
      pending += self.imports[next] ?? []
    }
    return order.compactMap { self.files[$0] }
  }
}
