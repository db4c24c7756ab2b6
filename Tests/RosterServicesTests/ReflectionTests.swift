import Foundation
import GRPCCore
import GRPCInProcessTransport
import RosterProto
import RosterServices
import SwiftProtobuf
import TestSupport
import Testing

@Suite("Server reflection", .timeLimit(.minutes(10)))
struct ReflectionTests {
  static let services = [
    "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection", "roster.v1.Analytics", "roster.v1.Directory",
    "roster.v1.Pictures",
  ]

  /// Sends `requests` on one v1 stream and returns the answers.
  static func ask(
    _ requests: [Grpc_Reflection_V1_ServerReflectionRequest]
  ) async throws -> [Grpc_Reflection_V1_ServerReflectionResponse] {
    try await withTemporaryStore { store async throws in
      try await withInProcessClient(store: store) { client in
        let reflection = Grpc_Reflection_V1_ServerReflection.Client(wrapping: client)
        return try await reflection.serverReflectionInfo(
          requestProducer: { writer in try await writer.write(contentsOf: requests) }
        ) { response in
          var answers: [Grpc_Reflection_V1_ServerReflectionResponse] = []
          for try await message in response.messages { answers.append(message) }
          return answers
        }
      }
    }
  }

  @Test("lists every service the server registers, in v1 and in v1alpha")
  func listServices() async throws {
    let answers = try await Self.ask([.with { $0.listServices = "" }])
    #expect(answers.first?.listServicesResponse.service.map(\.name) == Self.services)

    let alpha = try await withTemporaryStore { store async throws in
      try await withInProcessClient(store: store) { client in
        try await Grpc_Reflection_V1alpha_ServerReflection.Client(wrapping: client)
          .serverReflectionInfo(
            requestProducer: { writer in try await writer.write(.with { $0.listServices = "*" }) }
          ) { response in
            var names: [String] = []
            for try await message in response.messages {
              names += message.listServicesResponse.service.map(\.name)
            }
            return names
          }
      }
    }
    #expect(alpha == Self.services)
  }

  @Test("a symbol resolves to its file with every file it imports, and the set is closed")
  func fileContainingSymbol() async throws {
    let symbols = [
      "roster.v1.Directory", "roster.v1.Directory.GetEmployee", "roster.v1.Employee",
      ".roster.v1.Employee",
    ]
    let answers = try await Self.ask(
      symbols.map { symbol in .with { $0.fileContainingSymbol = symbol } }
    )
    #expect(answers.count == symbols.count)
    for (symbol, answer) in zip(symbols, answers) {
      let files = try answer.fileDescriptorResponse.fileDescriptorProto.map {
        try Google_Protobuf_FileDescriptorProto(serializedBytes: $0)
      }
      #expect(!files.isEmpty, "\(symbol)")
      let names = Set(files.map(\.name))
      for file in files {
        for dependency in file.dependency {
          #expect(names.contains(dependency), "\(symbol): \(dependency) missing")
        }
      }
      if symbol == "roster.v1.Directory" {
        #expect(files.first?.name == "roster/v1/directory.proto")
        #expect(
          files.first?.service.first?.method.count == Roster_V1_Directory.Method.descriptors.count
        )
        #expect(
          names.isSuperset(of: ["roster/v1/types.proto", "google/protobuf/field_mask.proto"])
        )
        // Comments come along, for tools that show them.
        #expect(files.first?.hasSourceCodeInfo == true)
      }
    }
  }

  @Test("files by name, and NOT_FOUND answers for what does not exist")
  func errors() async throws {
    let answers = try await Self.ask([
      .with { $0.fileByFilename = "roster/v1/analytics.proto" },
      .with { $0.fileByFilename = "../etc/passwd" },
      .with { $0.fileContainingSymbol = "roster.v1.Nope" },
      .with { $0.allExtensionNumbersOfType = "roster.v1.Employee" },
      .with {
        $0.fileContainingExtension = .with {
          $0.containingType = "roster.v1.Employee"
          $0.extensionNumber = 100
        }
      },
      .init(),
    ])
    #expect(answers.count == 6)
    let first = try Google_Protobuf_FileDescriptorProto(
      serializedBytes: try #require(answers[0].fileDescriptorResponse.fileDescriptorProto.first)
    )
    #expect(first.name == "roster/v1/analytics.proto")
    #expect(answers[1].errorResponse.errorCode == 5)
    #expect(answers[2].errorResponse.errorCode == 5)
    #expect(answers[2].errorResponse.errorMessage.contains("roster.v1.Nope"))
    #expect(answers[3].allExtensionNumbersResponse.baseTypeName == "roster.v1.Employee")
    #expect(answers[3].allExtensionNumbersResponse.extensionNumber.isEmpty)
    #expect(answers[4].errorResponse.errorCode == 5)
    #expect(answers[5].errorResponse.errorCode == 3)
    #expect(answers[2].originalRequest.fileContainingSymbol == "roster.v1.Nope")
  }
}
