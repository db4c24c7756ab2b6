import TestSupport
import Testing

/// The `roster` executable's allocator settings (`CAllocatorConfig`).
@Suite("Allocator", .timeLimit(.minutes(10)))
struct AllocatorConfigTests {
  @Test(
    "the roster binary's jemalloc gives freed pages back after a second; MALLOC_CONF still overrides it"
  )
  func dirtyPagesDecayInASecond() async throws {
    // jemalloc prints its options at exit with stats_print.
    let settled = try await RosterProcess.run(
      ["token", "--role", "reader"],
      environment: ["MALLOC_CONF": "stats_print:true"]
    )
    #expect(settled.status == 0)
    #expect(settled.errors.contains("opt.dirty_decay_ms: 1000 "), "\(settled.errors.prefix(2000))")
    let overridden = try await RosterProcess.run(
      ["token", "--role", "reader"],
      environment: ["MALLOC_CONF": "stats_print:true,dirty_decay_ms:5000"]
    )
    #expect(overridden.errors.contains("opt.dirty_decay_ms: 5000 "))
  }
}
