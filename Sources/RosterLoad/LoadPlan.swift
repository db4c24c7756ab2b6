/// One kind of request the load generator sends, one per RPC family.
public enum Scenario: String, CaseIterable, Sendable, Codable, Comparable {
  /// `GetEmployee` of a random guid from the live directory.
  case get
  /// One `ListEmployees` page, continuing earlier pages half of the time.
  case list
  /// `StreamEmployees`, read for a bounded number of pages.
  case stream
  /// `ListEmployees` with `name_contains` drawn from real names.
  case search
  /// `GetPicture`, the whole picture.
  case picture
  /// `GetThumbnail`.
  case thumbnail
  /// One of the Analytics reads, in turn.
  case analytics
  /// `UpdateEmployee` (four in five) and `CreateEmployee`. It changes the target's data.
  case write

  /// Where the scenario sorts in reports: declaration order.
  var ordinal: Int { Self.allCases.firstIndex(of: self)! }

  public static func < (lhs: Self, rhs: Self) -> Bool { lhs.ordinal < rhs.ordinal }
}

/// A weighted choice of scenarios, such as `get=60,list=25,picture=8,analytics=5,write=2`.
public struct Mix: Sendable, Equatable, CustomStringConvertible {
  /// The scenarios with their weights, in the order given.
  public let entries: [Entry]
  private let cumulative: [Int]

  /// One scenario and its weight.
  public struct Entry: Sendable, Equatable {
    public var scenario: Scenario
    public var weight: Int
  }

  /// A mix of one scenario.
  public init(_ scenario: Scenario) {
    self.init(entries: [Entry(scenario: scenario, weight: 1)])
  }

  init(entries: [Entry]) {
    self.entries = entries
    var sum = 0
    self.cumulative = entries.map {
      sum += $0.weight
      return sum
    }
  }

  /// Parses `name=weight` pairs separated by commas; a bare name weighs 1.
  ///
  /// ```swift
  /// let mix = try Mix(parsing: "get=60,list=25,write=2")
  /// ```
  public init(parsing text: String) throws(LoadError) {
    var entries: [Entry] = []
    for part in text.split(separator: ",", omittingEmptySubsequences: false) {
      let pair = part.split(separator: "=", omittingEmptySubsequences: false)
      let name = pair[0].trimmingCharacters(in: " ")
      guard let scenario = Scenario(rawValue: name) else {
        let known = Scenario.allCases.map(\.rawValue).joined(separator: ", ")
        throw LoadError("--mix: unknown scenario '\(name)' (known: \(known))")
      }
      guard !entries.contains(where: { $0.scenario == scenario }) else {
        throw LoadError("--mix: '\(name)' is given twice")
      }
      var weight = 1
      if pair.count == 2 {
        guard let parsed = Int(pair[1].trimmingCharacters(in: " ")), parsed >= 0 else {
          throw LoadError("--mix: the weight of '\(name)' must be a whole number ≥ 0")
        }
        weight = parsed
      } else if pair.count > 2 {
        throw LoadError("--mix: '\(part)' is not name=weight")
      }
      if weight > 0 { entries.append(Entry(scenario: scenario, weight: weight)) }
    }
    guard !entries.isEmpty else {
      throw LoadError("--mix: give at least one scenario with a weight above 0")
    }
    self.init(entries: entries)
  }

  /// The scenarios in the mix.
  public var scenarios: [Scenario] { self.entries.map(\.scenario) }

  /// The scenario a uniformly random `roll` lands on.
  func pick(_ roll: UInt64) -> Scenario {
    let point = Int(roll % UInt64(self.cumulative.last!))
    var low = 0
    var high = self.cumulative.count - 1
    while low < high {
      let middle = (low + high) / 2
      if self.cumulative[middle] > point { high = middle } else { low = middle + 1 }
    }
    return self.entries[low].scenario
  }

  public var description: String {
    self.entries.map { "\($0.scenario.rawValue)=\($0.weight)" }.joined(separator: ",")
  }
}

/// How requests are sent.
public enum LoadModel: Sendable, Equatable {
  /// A fixed number of requests in flight: each sender waits for its answer before the next.
  case closed(concurrency: Int)
  /// A constant arrival rate in requests per second, whatever the answers do. Latency is
  /// measured from each request's intended send time, which corrects for coordinated omission.
  case open(rate: Double, maxInFlight: Int)
}

/// How long the measured part of a run lasts.
public enum RunLength: Sendable, Equatable {
  case duration(Duration)
  case requests(Int)
}

/// A service-level objective that fails the run when missed.
public enum Gate: Sendable, Equatable {
  /// The 99th percentile latency over all requests must not exceed this.
  case maxP99(Duration)
  /// Failed requests over all requests must not exceed this fraction.
  case maxErrorRate(Double)
  /// Total requests per second must reach this.
  case minQPS(Double)
}

/// A load-generator error with a message for the operator.
public struct LoadError: Error, CustomStringConvertible, Sendable {
  public var description: String
  public init(_ description: String) { self.description = description }
}

/// Parsers for the command line's durations, rates and percentages.
public enum LoadParsing {
  /// Parses `30s`, `250ms`, `400us`, `2m`, `1.5s` or a bare number of seconds.
  public static func duration(_ text: String, flag: String) throws(LoadError) -> Duration {
    let units: [(String, Double)] = [
      ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600),
    ]
    var number = Substring(text.trimmingCharacters(in: " "))
    var scale = 1.0
    for (suffix, factor) in units where number.hasSuffix(suffix) {
      let stripped = number.dropLast(suffix.count)
      if Double(stripped) != nil {
        number = stripped
        scale = factor
        break
      }
    }
    guard let value = Double(number), value.isFinite, value >= 0 else {
      throw LoadError("\(flag): '\(text)' is not a duration such as 30s, 250ms or 400us")
    }
    return .nanoseconds(Int64((value * scale * 1e9).rounded()))
  }

  /// Parses `0.1%` or a bare fraction such as `0.001`.
  public static func fraction(_ text: String, flag: String) throws(LoadError) -> Double {
    let trimmed = text.trimmingCharacters(in: " ")
    let isPercent = trimmed.hasSuffix("%")
    guard let value = Double(isPercent ? String(trimmed.dropLast()) : trimmed), value >= 0 else {
      throw LoadError("\(flag): '\(text)' is not a rate such as 0.1% or 0.001")
    }
    let fraction = isPercent ? value / 100 : value
    guard fraction <= 1 else { throw LoadError("\(flag): '\(text)' is above 100%") }
    return fraction
  }

  /// Parses `1000`, `1000/s` or `60000/m` into requests per second.
  public static func rate(_ text: String, flag: String) throws(LoadError) -> Double {
    let trimmed = text.trimmingCharacters(in: " ")
    var number = Substring(trimmed)
    var perSeconds = 1.0
    if trimmed.hasSuffix("/s") {
      number = number.dropLast(2)
    } else if trimmed.hasSuffix("/m") {
      number = number.dropLast(2)
      perSeconds = 60
    }
    guard let value = Double(number), value.isFinite, value > 0 else {
      throw LoadError("\(flag): '\(text)' is not a rate such as 1000/s")
    }
    return value / perSeconds
  }
}

extension StringProtocol {
  fileprivate func trimmingCharacters(in set: Character) -> String {
    var text = Substring(self)
    while text.first == set { text = text.dropFirst() }
    while text.last == set { text = text.dropLast() }
    return String(text)
  }
}
