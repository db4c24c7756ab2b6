public import GRPCCore
public import Testing

/// Expects `body` to fail with `code`, and with a message that mentions `mentioning`.
public func expectStatus(
  _ code: RPCError.Code,
  mentioning: String,
  sourceLocation: SourceLocation = #_sourceLocation,
  _ body: () async throws -> Void
) async {
  do {
    try await body()
    Issue.record("expected \(code), but the call succeeded", sourceLocation: sourceLocation)
  } catch let error as RPCError {
    #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    #expect(
      error.message.contains(mentioning),
      "message '\(error.message)' should mention '\(mentioning)'",
      sourceLocation: sourceLocation
    )
  } catch {
    Issue.record("expected RPCError \(code), got \(error)", sourceLocation: sourceLocation)
  }
}
