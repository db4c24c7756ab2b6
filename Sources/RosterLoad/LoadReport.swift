internal import Foundation
internal import Histogram

/// The figures of one run: what the summary table prints and what `--json` writes.
public struct LoadReport: Codable, Sendable {
  /// The server, as `HOST:PORT`.
  public var target: String
  /// Closed or open loop, in words.
  public var model: String
  /// The mix, as `name=weight` pairs.
  public var mix: String
  public var connections: Int
  public var warmupSeconds: Double
  /// The measured time: from the end of the warm-up to the last measured answer.
  public var seconds: Double
  /// Employees the discovery stream saw.
  public var employeesDiscovered: Int
  /// One entry per scenario that ran, in scenario order.
  public var scenarios: [ScenarioReport]
  /// Every scenario together.
  public var total: ScenarioReport
  /// This process's user and system CPU time per measured request, in microseconds.
  public var clientCPUMicrosecondsPerRequest: Double
  /// The gates checked, if any.
  public var gates: [GateResult] = []

  /// Whether every gate passed.
  public var passed: Bool { self.gates.allSatisfy(\.passed) }
}

/// One scenario's figures.
public struct ScenarioReport: Codable, Sendable {
  public var scenario: String
  public var requests: Int
  public var errors: Int
  public var qps: Double
  /// Rows (reads), bytes (pictures) or writes carried by the successful requests.
  public var items: Int
  public var latencyMicroseconds: LatencySummary
  /// The latency of the requests that succeeded, and of those that failed.
  public var succeededLatencyMicroseconds: LatencySummary
  public var failedLatencyMicroseconds: LatencySummary
  /// Failed requests by canonical status name, such as `UNAVAILABLE`.
  public var errorsByStatus: [String: Int]
}

/// Latency percentiles in microseconds.
public struct LatencySummary: Codable, Sendable, Equatable {
  public var p50: UInt64
  public var p90: UInt64
  public var p99: UInt64
  public var p999: UInt64
  public var max: UInt64
  public var mean: Double

  init(_ histogram: Histogram<UInt64>) {
    let empty = histogram.totalCount == 0
    self.p50 = empty ? 0 : histogram.valueAtPercentile(50)
    self.p90 = empty ? 0 : histogram.valueAtPercentile(90)
    self.p99 = empty ? 0 : histogram.valueAtPercentile(99)
    self.p999 = empty ? 0 : histogram.valueAtPercentile(99.9)
    self.max = empty ? 0 : histogram.max
    self.mean = empty ? 0 : histogram.mean
  }
}

/// One gate's verdict.
public struct GateResult: Codable, Sendable {
  public var gate: String
  public var limit: String
  public var actual: String
  public var passed: Bool
}

extension LoadReport {
  /// Checks `gates` against the totals and records the verdicts.
  ///
  /// - Returns: whether every gate passed.
  @discardableResult
  public mutating func check(_ gates: [Gate]) -> Bool {
    self.gates = gates.map { gate in
      switch gate {
      case .maxP99(let limit):
        let limitMicroseconds = UInt64(Swift.max(0, limit.microseconds))
        let actual = self.total.latencyMicroseconds.p99
        return GateResult(
          gate: "p99",
          limit: "≤ " + formatLatency(limitMicroseconds),
          actual: formatLatency(actual),
          passed: self.total.requests > 0 && actual <= limitMicroseconds
        )
      case .maxErrorRate(let limit):
        let rate =
          self.total.requests == 0 ? 1 : Double(self.total.errors) / Double(self.total.requests)
        return GateResult(
          gate: "error rate",
          limit: "≤ " + formatPercent(limit),
          actual: formatPercent(rate),
          passed: rate <= limit
        )
      case .minQPS(let limit):
        return GateResult(
          gate: "QPS",
          limit: "≥ " + formatNumber(limit),
          actual: formatNumber(self.total.qps),
          passed: self.total.qps >= limit
        )
      }
    }
    return self.passed
  }

  /// The summary a person reads at the end of a run.
  public var text: String {
    var lines: [String] = []
    lines.append(
      "roster load: \(self.target), \(self.model), \(self.connections) connection"
        + (self.connections == 1 ? "" : "s") + ", mix \(self.mix)"
    )
    lines.append(
      "measured \(String(format: "%.1f", self.seconds)) s after a \(String(format: "%.1f", self.warmupSeconds)) s "
        + "warm-up; \(self.employeesDiscovered) employees discovered"
    )
    lines.append("")
    let header = ["scenario", "requests", "QPS", "p50", "p90", "p99", "p99.9", "max", "errors"]
    var rows = self.scenarios.map(Self.row)
    if self.scenarios.count > 1 { rows.append(Self.row(self.total)) }
    let widths = header.indices.map { column in
      ([header[column]] + rows.map { $0[column] }).map(\.count).max()!
    }
    func line(_ cells: [String]) -> String {
      cells.enumerated().map { column, cell in
        let pad = String(repeating: " ", count: widths[column] - cell.count)
        return column == 0 ? cell + pad : pad + cell
      }.joined(separator: "  ")
    }
    lines.append(line(header))
    lines.append(contentsOf: rows.map(line))
    let failures = self.scenarios.flatMap { report in
      report.errorsByStatus.sorted { $0.key < $1.key }.map {
        "\(report.scenario) \($0.key) \($0.value)"
      }
    }
    if !failures.isEmpty {
      lines.append("")
      lines.append("errors by status: " + failures.joined(separator: ", "))
    }
    lines.append("")
    lines.append(
      "client CPU: \(String(format: "%.1f", self.clientCPUMicrosecondsPerRequest)) µs per request"
    )
    for gate in self.gates {
      lines.append(
        "gate \(gate.gate) \(gate.limit): \(gate.actual), \(gate.passed ? "passed" : "FAILED")"
      )
    }
    return lines.joined(separator: "\n")
  }

  static func make(
    configuration: LoadConfiguration,
    tallies: [Scenario: Tally],
    seconds: Double,
    employeesSeen: Int,
    clientCPUSeconds: Double
  ) -> LoadResult {
    var total = Tally()
    for tally in tallies.values { total.add(tally) }
    func report(_ name: String, _ tally: Tally) -> ScenarioReport {
      ScenarioReport(
        scenario: name,
        requests: tally.requests,
        errors: tally.errorCount,
        qps: seconds > 0 ? Double(tally.requests) / seconds : 0,
        items: tally.items,
        latencyMicroseconds: LatencySummary(tally.histogram),
        succeededLatencyMicroseconds: LatencySummary(tally.succeeded),
        failedLatencyMicroseconds: LatencySummary(tally.failed),
        errorsByStatus: Dictionary(
          uniqueKeysWithValues: tally.errors.map { (statusName($0.key), $0.value) }
        )
      )
    }
    let report = LoadReport(
      target: configuration.targetDescription,
      model: configuration.modelDescription,
      mix: configuration.mix.description,
      connections: configuration.connections,
      warmupSeconds: configuration.warmup.inSeconds,
      seconds: seconds,
      employeesDiscovered: employeesSeen,
      scenarios: tallies.keys.sorted().map { report($0.rawValue, tallies[$0]!) },
      total: report("total", total),
      clientCPUMicrosecondsPerRequest: total.requests > 0
        ? clientCPUSeconds * 1e6 / Double(total.requests) : 0
    )
    return LoadResult(
      report: report,
      histograms: tallies.mapValues(\.histogram),
      total: total.histogram
    )
  }

  private static func row(_ report: ScenarioReport) -> [String] {
    let latency = report.latencyMicroseconds
    return [
      report.scenario, String(report.requests), String(format: "%.1f", report.qps),
      formatLatency(latency.p50), formatLatency(latency.p90), formatLatency(latency.p99),
      formatLatency(latency.p999), formatLatency(latency.max), String(report.errors),
    ]
  }
}

/// The canonical name of a gRPC status code, as the gRPC specification spells it.
public func statusName(_ code: Int) -> String {
  let names = [
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
  ]
  return names.indices.contains(code) ? names[code] : "CODE_\(code)"
}

/// Microseconds as `850µs`, `1.25ms` or `2.10s`.
func formatLatency(_ microseconds: UInt64) -> String {
  if microseconds < 1_000 { return "\(microseconds)µs" }
  if microseconds < 1_000_000 { return String(format: "%.2fms", Double(microseconds) / 1e3) }
  return String(format: "%.2fs", Double(microseconds) / 1e6)
}

private func formatPercent(_ fraction: Double) -> String {
  String(format: "%.3f%%", fraction * 100)
}

private func formatNumber(_ value: Double) -> String {
  String(format: "%.1f", value)
}
