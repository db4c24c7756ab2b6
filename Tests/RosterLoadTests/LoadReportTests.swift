import Foundation
import Histogram
import Testing

@testable import RosterLoad

#if canImport(FoundationXML)
import FoundationXML
#endif

@Suite("Load reports: figures, gates, plot and .hgrm", .timeLimit(.minutes(10)))
struct LoadReportTests {
  /// 1,000 `get` calls at 1–1,000 µs (one failed), and 100 `list` calls at 10 ms.
  static func sample() -> LoadResult {
    var get = Tally()
    for microseconds in 1 ... 1_000 {
      get.record(
        microseconds: UInt64(microseconds),
        status: microseconds == 500 ? 14 : nil,
        items: 1
      )
    }
    var list = Tally()
    for _ in 0 ..< 100 { list.record(microseconds: 10_000, status: nil, items: 50) }
    return LoadReport.make(
      configuration: LoadConfiguration(target: .ipv4(address: "127.0.0.1", port: 50051)),
      tallies: [.get: get, .list: list],
      seconds: 2,
      employeesSeen: 1_000,
      clientCPUSeconds: 0.011
    )
  }

  @Test("the figures come from the histograms and counts")
  func figures() {
    let report = Self.sample().report
    #expect(report.scenarios.map(\.scenario) == ["get", "list"])
    let get = report.scenarios[0]
    #expect(get.requests == 1_000)
    #expect(get.errors == 1)
    #expect(get.errorsByStatus == ["UNAVAILABLE": 1])
    #expect(get.qps == 500)
    #expect(get.items == 999)
    #expect(abs(Double(get.latencyMicroseconds.p50) - 500) <= 1)
    #expect(abs(Double(get.latencyMicroseconds.p99) - 990) <= 1)
    #expect(get.latencyMicroseconds.max == 1_000)
    // The one failed call (at 500 µs) has a histogram of its own; the others' leaves it out.
    #expect(get.failedLatencyMicroseconds.max == 500)
    #expect(get.failedLatencyMicroseconds.p50 == 500)
    #expect(get.succeededLatencyMicroseconds.max == 1_000)
    #expect(abs(Double(get.succeededLatencyMicroseconds.p50) - 501) <= 1)
    #expect(report.total.requests == 1_100)
    #expect(report.total.qps == 550)
    #expect(report.scenarios[1].items == 5_000)
    // p99 of all: the 100 list calls are the slowest 9%.
    #expect(report.total.latencyMicroseconds.p99 >= 9_990)
    #expect(abs(report.clientCPUMicrosecondsPerRequest - 10) < 0.01)
  }

  @Test("gates pass and fail on the totals")
  func gates() {
    var report = Self.sample().report
    let allPass = report.check([.maxP99(.milliseconds(11)), .maxErrorRate(0.001), .minQPS(500)])
    #expect(allPass)
    #expect(report.gates.map(\.passed) == [true, true, true])
    let slow = report.check([.maxP99(.milliseconds(5))])
    #expect(!slow)
    let failing = report.check([.maxErrorRate(0.0005)])
    #expect(!failing)
    let short = report.check([.minQPS(600)])
    #expect(!short)
    #expect(report.text.contains("gate QPS ≥ 600.0: 550.0, FAILED"))
  }

  @Test("the summary has a row per scenario, a total, and the errors by status")
  func text() {
    let text = Self.sample().report.text
    let lines = text.split(separator: "\n").map(String.init)
    #expect(lines.contains { $0.hasPrefix("get ") && $0.contains("1000") && $0.contains("500.0") })
    #expect(lines.contains { $0.hasPrefix("list ") && $0.contains("10.0") })
    #expect(lines.contains { $0.hasPrefix("total ") && $0.contains("1100") })
    #expect(text.contains("errors by status: get UNAVAILABLE 1"))
    #expect(text.contains("client CPU: 10.0 µs per request"))
  }

  @Test("the report round-trips through JSON")
  func json() throws {
    let report = Self.sample().report
    let data = try JSONEncoder().encode(report)
    let decoded = try JSONDecoder().decode(LoadReport.self, from: data)
    #expect(decoded.total.latencyMicroseconds == report.total.latencyMicroseconds)
    #expect(decoded.scenarios.map(\.requests) == [1_000, 100])
  }

  @Test("the plot is well-formed SVG with one line per scenario and one for all")
  func plot() throws {
    let svg = Self.sample().latencyPlot
    let parser = XMLParser(data: Data(svg.utf8))
    #expect(parser.parse(), "\(parser.parserError.map(String.init(describing:)) ?? "")")
    #expect(svg.components(separatedBy: "<polyline").count - 1 == 3)
    #expect(
      svg.contains(">get</text>") && svg.contains(">list</text>") && svg.contains(">all</text>")
    )
    #expect(svg.contains("99.9%"))
    // Only xmlns.
    #expect(!svg.contains("http://") || svg.components(separatedBy: "http://").count == 2)
  }

  @Test("the .hgrm output is HdrHistogram's format, in milliseconds")
  func hgrm() throws {
    let text = Self.sample().hgrm
    let lines = text.split(separator: "\n").map(String.init)
    #expect(lines.first?.contains("Value") == true && lines.first?.contains("Percentile") == true)
    #expect(text.contains("#[Mean"))
    #expect(text.contains("Total count    =         1100"))
    // The last data line reaches the 100th percentile at the 10 ms maximum (to the
    // histogram's three significant digits).
    let data = lines.filter {
      $0.first == " " && (3 ... 4).contains($0.split(separator: " ").count)
    }
    let last = try #require(data.last?.split(separator: " "))
    #expect(abs(Double(last[0])! - 10.0) < 0.01)
    #expect(Double(last[1])! == 1.0)
    #expect(Int(last[2]) == 1_100)
  }

  @Test("latencies read as a person writes them")
  func latencyFormat() {
    #expect(formatLatency(850) == "850µs")
    #expect(formatLatency(1_250) == "1.25ms")
    #expect(formatLatency(2_100_000) == "2.10s")
    #expect(statusName(14) == "UNAVAILABLE")
    #expect(statusName(99) == "CODE_99")
  }
}
