import Testing

@testable import RosterServices

/// The token bucket behind `CallerRateInterceptor`, on a clock moved by hand: a burst passes,
/// the next call waits one call's time, the bucket refills at the rate, and a caller that goes
/// on after `ignoredRefusals` refusals is told once per so many.
@Suite("Caller rates")
struct CallerRateTests {
  @Test("a burst passes, then each call waits for the rate; time refills the bucket")
  func bucket() {
    var buckets = CallerRateInterceptor.Buckets()
    let rate = CallerRate(perSecond: 10, burst: 5)
    let start = ContinuousClock.now
    for _ in 0 ..< 5 { #expect(buckets.take("a", rate: rate, at: start) == nil) }
    let refused = buckets.take("a", rate: rate, at: start)
    #expect(refused?.wait == .milliseconds(100))
    #expect(refused?.ignored == false)
    // Another caller's bucket is its own.
    #expect(buckets.take("b", rate: rate, at: start) == nil)
    // A tenth of a second refills one call; half a second, the whole burst and no more.
    #expect(buckets.take("a", rate: rate, at: start + .milliseconds(100)) == nil)
    let later = start + .seconds(10)
    for _ in 0 ..< 5 { #expect(buckets.take("a", rate: rate, at: later) == nil) }
    #expect(buckets.take("a", rate: rate, at: later) != nil)
  }

  @Test("a caller refused ignoredRefusals times since its bucket was half full is told so, once")
  func ignored() {
    var buckets = CallerRateInterceptor.Buckets()
    let rate = CallerRate(perSecond: 1, burst: 2)
    let now = ContinuousClock.now
    _ = buckets.take("a", rate: rate, at: now)
    _ = buckets.take("a", rate: rate, at: now)
    let limit = CallerRateInterceptor.ignoredRefusals
    let told = (0 ..< 2 * limit).map { _ in buckets.take("a", rate: rate, at: now)?.ignored == true
    }
    #expect(told.enumerated().filter(\.element).map(\.offset) == [limit - 1, 2 * limit - 1])
  }

  @Test("the default burst is a tenth of the rate, at least 10 and at most the rate")
  func defaultBurst() {
    #expect(CallerRate(perSecond: 2000).burst == 200)
    #expect(CallerRate(perSecond: 50).burst == 10)
    #expect(CallerRate(perSecond: 5).burst == 5)
  }
}
