/// Whether `condition` holds within `limit`, asked every 50 ms: a bound that only a hang
/// reaches (the suites share 2 cores, and a busy machine may take seconds for what usually
/// takes milliseconds; how soon is a speed, which the benchmarks measure). Returns as soon as
/// it holds.
///
/// A `for _ in 0 ..< n where condition` loop is not this: `where` skips the body of the
/// iterations whose condition fails and goes on asking it, n times in all.
public func eventually(
  within limit: Duration = .seconds(60),
  _ condition: () async throws -> Bool
) async throws -> Bool {
  let end = ContinuousClock.now + limit
  while true {
    if try await condition() { return true }
    guard ContinuousClock.now < end else { return false }
    try await Task.sleep(for: .milliseconds(50))
  }
}
