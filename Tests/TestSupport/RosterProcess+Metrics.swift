internal import Foundation
internal import FoundationNetworking

extension RosterProcess {
  /// Why a metric could not be read.
  public struct MetricsError: Error, CustomStringConvertible {
    public let description: String
  }

  /// The sample lines of the server's `GET /metrics` (started with `--metrics-port 0`).
  public func metricLines() async throws -> [Substring] {
    guard let url = self.metricsURL.flatMap(URL.init(string:)) else {
      throw MetricsError(description: "the server has no metrics endpoint (--metrics-port)")
    }
    let (data, _) = try await URLSession.shared.data(from: url)
    return String(decoding: data, as: UTF8.self).split(separator: "\n").filter {
      !$0.hasPrefix("#")
    }
  }

  /// The value of the sample written `name` or `name{labels}` exactly as given, e.g.
  /// `roster_lane_interrupted_total{lane="heavy"}`; 0 when the server has none yet.
  public func metric(_ sample: String) async throws -> Double {
    let line = try await self.metricLines().first { $0.hasPrefix(sample + " ") }
    return Double(line?.split(separator: " ").last ?? "0") ?? 0
  }
}
