import Foundation
import RosterProto
import SwiftProtobuf
import Testing

/// What the protos promise beyond their messages, read from the descriptor set the server
/// serves through reflection (made from `Protos/` by scripts/generate-protos).
@Suite("The protos' contract", .timeLimit(.minutes(1)))
struct ProtoContractTests {
  /// The methods that read and change nothing: the ones a Connect client may call with GET.
  static let reads: Set<String> = [
    "Directory/ListEmployees", "Directory/StreamEmployees", "Directory/GetEmployee",
    "Directory/BatchGetEmployees", "Directory/CountEmployees", "Directory/WatchChanges",
    "Pictures/GetPicture", "Pictures/GetThumbnail",
    "Analytics/DepartmentHeadcounts", "Analytics/DepartmentSummary", "Analytics/EmployeeSales",
    "Analytics/AggregateSales", "Analytics/AggregateEmployees", "Analytics/SalesCalendar",
  ]

  @Test("every read, and nothing that writes, is marked idempotency_level = NO_SIDE_EFFECTS")
  func readsAreMarked() throws {
    let set = try Google_Protobuf_FileDescriptorSet(
      serializedBytes: RosterDescriptors.fileDescriptorSet
    )
    var all = Set<String>()
    var marked = Set<String>()
    for file in set.file where file.package == "roster.v1" {
      for service in file.service {
        for method in service.method {
          let name = "\(service.name)/\(method.name)"
          all.insert(name)
          if method.options.idempotencyLevel == .noSideEffects { marked.insert(name) }
        }
      }
    }
    #expect(Self.reads.isSubset(of: all), "\(Self.reads.subtracting(all)) are not methods")
    #expect(
      marked == Self.reads,
      "marked but writing: \(marked.subtracting(Self.reads)); unmarked reads: \(Self.reads.subtracting(marked))"
    )
  }

  @Test("enums start at an _UNSPECIFIED zero value that means the default (buf lint's STANDARD)")
  func groupByZeroIsUnspecified() {
    #expect(Roster_V1_GroupBy(rawValue: 0) == .unspecified)
    #expect(Roster_V1_AggregateSalesRequest().groupBy == .unspecified)
  }
}
