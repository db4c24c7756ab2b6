import RosterDomain
import Testing

@testable import RosterLoad

@Suite("Load plans: mixes, durations, rates", .timeLimit(.minutes(10)))
struct LoadPlanTests {
  @Test("a mix keeps its scenarios, weights and order, and drops zero weights")
  func parsesMix() throws {
    let mix = try Mix(parsing: "get=60,list=25, picture=8,analytics=5,write=2,stream=0,search")
    #expect(mix.scenarios == [.get, .list, .picture, .analytics, .write, .search])
    #expect(mix.entries.map(\.weight) == [60, 25, 8, 5, 2, 1])
    #expect(mix.description == "get=60,list=25,picture=8,analytics=5,write=2,search=1")
  }

  @Test(
    "a bad mix is refused with a message naming the problem",
    arguments: [
      ("fetch=3", "unknown scenario 'fetch'"),
      ("get=1,get=2", "'get' is given twice"),
      ("get=x", "the weight of 'get'"),
      ("get=-1", "the weight of 'get'"),
      ("get=0", "at least one scenario"),
      ("get=1=2", "is not name=weight"),
      ("", "unknown scenario ''"),
    ]
  )
  func refusesBadMix(text: String, message: String) {
    #expect {
      _ = try Mix(parsing: text)
    } throws: { error in
      (error as? LoadError)?.description.contains(message) == true
    }
  }

  @Test("picks follow the weights")
  func picksFollowWeights() throws {
    let mix = try Mix(parsing: "get=60,list=25,picture=8,analytics=5,write=2")
    var random = SplitMix64(seed: 42)
    var counts: [Scenario: Int] = [:]
    let rolls = 200_000
    for _ in 0 ..< rolls { counts[mix.pick(random.next()), default: 0] += 1 }
    for entry in mix.entries {
      let share = Double(counts[entry.scenario] ?? 0) / Double(rolls) * 100
      #expect(abs(share - Double(entry.weight)) < 0.5, "\(entry.scenario): \(share)%")
    }
    #expect(counts.keys.count == 5)
  }

  @Test(
    "durations read as an operator writes them",
    arguments: [
      ("30s", 30_000_000), ("250ms", 250_000), ("400us", 400), ("400µs", 400), ("2m", 120_000_000),
      ("1.5s", 1_500_000), ("7", 7_000_000), ("0s", 0),
    ]
  )
  func parsesDurations(text: String, microseconds: Int64) throws {
    #expect(try LoadParsing.duration(text, flag: "--duration").microseconds == microseconds)
  }

  @Test("a bad duration names its flag", arguments: ["abc", "-1s", "5 parsecs", "ms"])
  func refusesBadDurations(text: String) {
    #expect {
      _ = try LoadParsing.duration(text, flag: "--max-p99")
    } throws: { error in
      (error as? LoadError)?.description.hasPrefix("--max-p99: '\(text)'") == true
    }
  }

  @Test("error rates read as percentages or fractions")
  func parsesFractions() throws {
    #expect(try LoadParsing.fraction("0.1%", flag: "--max-error-rate") == 0.001)
    #expect(try LoadParsing.fraction("0.001", flag: "--max-error-rate") == 0.001)
    #expect(try LoadParsing.fraction("0%", flag: "--max-error-rate") == 0)
    #expect(throws: LoadError.self) { try LoadParsing.fraction("150%", flag: "--max-error-rate") }
    #expect(throws: LoadError.self) { try LoadParsing.fraction("some", flag: "--max-error-rate") }
  }

  @Test("rates read per second or per minute")
  func parsesRates() throws {
    #expect(try LoadParsing.rate("2000", flag: "--rate") == 2000)
    #expect(try LoadParsing.rate("2000/s", flag: "--rate") == 2000)
    #expect(try LoadParsing.rate("600/m", flag: "--rate") == 10)
    #expect(throws: LoadError.self) { try LoadParsing.rate("0/s", flag: "--rate") }
    #expect(throws: LoadError.self) { try LoadParsing.rate("fast", flag: "--rate") }
  }
}
