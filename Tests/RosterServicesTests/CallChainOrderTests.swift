import GRPCCore
import RosterLocks
import Testing

@testable import RosterServices

/// `CallChain`'s order: begins outermost first, ends innermost first and only for the
/// interceptors that began, each seeing the error the inner ones passed on.
@Suite("Call chain order", .timeLimit(.minutes(10)))
struct CallChainOrderTests {
  @Test("ends run innermost first, for the interceptors that began, with the error each passes on")
  func order() async throws {
    let trace = Trace()
    let chain = CallChain([
      Step(name: "outer", trace: trace),
      Step(name: "refuses", trace: trace, refuses: true),
      Step(name: "inner", trace: trace),
    ])
    let refused = Result {
      try chain.runNow(metadata: [:], context: CallChainTests.context(), arrived: .now) { 1 }
    }
    #expect(CallChainTests.describe(refused) == "permissionDenied: refused by refuses")
    #expect(
      trace.lines.withLock { $0 } == [
        "begin outer", "begin refuses", "end outer PERMISSION_DENIED",
      ]
    )
    trace.lines.withLock { $0 = [] }
    let renamed = CallChain([
      Step(name: "outer", trace: trace),
      Step(name: "renames", trace: trace, renames: true),
      Step(name: "inner", trace: trace),
    ])
    let failed = await CallChainTests.streaming(renamed) {
      throw RPCError(code: .notFound, message: "gone")
    }
    #expect(CallChainTests.describe(failed) == "unavailable: renamed")
    #expect(
      trace.lines.withLock { $0 } == [
        "begin outer", "begin renames", "begin inner", "end inner NOT_FOUND",
        "end renames NOT_FOUND", "end outer UNAVAILABLE",
      ]
    )
  }

}

/// What the steps wrote down, in order.
private final class Trace: Sendable {
  let lines = Locked<[String]>([])
}

/// An interceptor that writes down its begin and end, and may refuse the call or replace its
/// error.
private struct Step: CallInterceptor {
  let name: String
  let trace: Trace
  var refuses = false
  var renames = false

  func begin(_ call: inout CallScope) throws {
    self.trace.lines.withLock { $0.append("begin \(self.name)") }
    if self.refuses { throw RPCError(code: .permissionDenied, message: "refused by \(self.name)") }
  }

  func end(_ call: CallScope, error: inout (any Error)?) {
    let code = error.map { RequestLogInterceptor.name(RequestLogInterceptor.code(of: $0)) } ?? "OK"
    self.trace.lines.withLock { $0.append("end \(self.name) \(code)") }
    if self.renames, error != nil { error = RPCError(code: .unavailable, message: "renamed") }
  }
}
