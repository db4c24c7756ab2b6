import Foundation
import RosterProto
import SwiftProtobuf
import Testing

/// What the protos promise beyond their messages, read from the descriptor set the server
/// serves through reflection (made from `Protos/` by scripts/generate-protos).
@Suite("The protos' contract", .timeLimit(.minutes(10)))
struct ProtoContractTests {
  /// Reads are the methods a reader may call, and the ones a Connect client may call with GET:
  /// the two declarations of a method (its role, its `idempotency_level`) agree.
  @Test("a method is marked idempotency_level = NO_SIDE_EFFECTS exactly when a reader may call it")
  func readsAreMarked() throws {
    let set = try Google_Protobuf_FileDescriptorSet(
      serializedBytes: RosterDescriptors.fileDescriptorSet,
      extensions: Roster_V1_Options_Extensions
    )
    var reads = 0
    for file in set.file where file.package == "roster.v1" {
      for service in file.service {
        for method in service.method {
          let reader = method.options.Roster_V1_policy.role == .reader
          let marked = method.options.idempotencyLevel == .noSideEffects
          #expect(reader == marked, "\(service.name)/\(method.name): role and idempotency_level")
          if reader { reads += 1 }
        }
      }
    }
    #expect(reads > 0)
  }

  @Test("enums start at an _UNSPECIFIED zero value that means the default (buf lint's STANDARD)")
  func groupByZeroIsUnspecified() {
    #expect(Roster_V1_GroupBy(rawValue: 0) == .unspecified)
    #expect(Roster_V1_AggregateSalesRequest().groupBy == .unspecified)
  }
}
