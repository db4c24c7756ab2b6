import GRPCCore
import RosterDomain
import RosterProto
import Testing

@testable import RosterServices

/// Read-your-writes across machines (`ChangeTokens`): what a read names, where it may read,
/// and the token a write's reply carries, the same through each of the chain's forms.
@Suite("Change tokens")
struct ChangeTokenTests {
  static let interceptor = CallControlInterceptor(deadline: .seconds(60))

  /// What the handler of `method` sees of its control, through each form of the chain.
  static func seen(_ method: MethodDescriptor, _ metadata: Metadata) async -> [String] {
    let handler: @Sendable () throws -> String = {
      let control = CallControl.current
      return "standby \(control?.standbyReads ?? false) must see \(control?.mustSee ?? -1)"
    }
    let context = CallChainTests.context(method)
    return [
      CallChainTests.describe(
        await CallChainTests.unary(Self.interceptor, metadata: metadata, context: context, handler)
      ),
      CallChainTests.describe(
        await CallChainTests.now(Self.interceptor, metadata: metadata, context: context, handler)
      ),
      CallChainTests.describe(
        await CallChainTests.streaming(
          Self.interceptor,
          metadata: metadata,
          context: context,
          handler
        )
      ),
    ]
  }

  @Test("a read that may use a standby takes the change it must see; others read the primary")
  func placement() async {
    let token: Metadata = [ChangeTokens.key: "42"]
    #expect(
      await Self.seen(CallChainTests.getEmployee, token)
        == Array(repeating: "value standby true must see 42", count: 3)
    )
    #expect(
      await Self.seen(CallChainTests.getEmployee, [:])
        == Array(repeating: "value standby true must see -1", count: 3)
    )
    // The feed follows the primary's commit order; a write reads where it writes.
    for method in [
      Roster_V1_Directory.Method.WatchChanges.descriptor,
      Roster_V1_Directory.Method.UpdateEmployee.descriptor,
      Roster_V1_Pictures.Method.PutPicture.descriptor,
    ] {
      #expect(
        await Self.seen(method, token)
          == Array(repeating: "value standby false must see -1", count: 3),
        "\(method)"
      )
    }
    for bad in ["soon", "-1", "99999999999999999999", ""] {
      let outcomes = await Self.seen(CallChainTests.getEmployee, [ChangeTokens.key: .string(bad)])
      #expect(
        outcomes
          == Array(
            repeating:
              "invalidArgument: x-roster-change-token metadata: '\(bad)' is not a change token this server issued",
            count: 3
          ),
        "\(bad)"
      )
    }
  }

  @Test("a write's reply carries the newest change it committed, a read's none")
  func replyHeaders() async throws {
    let chain = CallChain([Self.interceptor])
    let method = Roster_V1_Directory.Method.UpdateEmployee.descriptor
    let wrote = try await chain.run(metadata: [:], context: CallChainTests.context(method)) {
      CallControl.current?.wrote(through: 7)
      CallControl.current?.wrote(through: 5)
      return 1
    }
    #expect(wrote.headers == [ChangeTokens.key: "7"])
    let read = try await chain.run(metadata: [:], context: CallChainTests.context()) { 1 }
    #expect(read.headers.isEmpty)

    // Through `GRPCServer` (a client-streamed write): in the response's metadata.
    let response: StreamingServerResponse<Int> = try await chain.intercept(
      request: StreamingServerRequest(single: ServerRequest(metadata: [:], message: ())),
      context: CallChainTests.context(Roster_V1_Directory.Method.UpsertEmployees.descriptor)
    ) { _, _ in
      CallControl.current?.wrote(through: 9)
      return StreamingServerResponse(single: ServerResponse(message: 1))
    }
    #expect(try response.accepted.get().metadata == [ChangeTokens.key: "9"])
  }
}
