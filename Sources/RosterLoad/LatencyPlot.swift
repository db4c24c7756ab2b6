internal import Foundation
internal import Histogram

extension LoadResult {
  /// HdrHistogram's standard percentile output (`.hgrm`) of every request, in milliseconds,
  /// as HdrHistogram's plotter reads it.
  public var hgrm: String {
    var text = ""
    self.total.outputPercentileDistribution(to: &text, outputValueUnitScalingRatio: 1_000)
    return text
  }

  /// A self-contained SVG of latency by percentile: one line per scenario and one for all,
  /// on the usual logarithmic percentile axis (50%, 90%, 99%, 99.9%, …).
  public var latencyPlot: String {
    var series: [(name: String, histogram: Histogram<UInt64>)] = self.histograms.keys.sorted().map {
      ($0.rawValue, self.histograms[$0]!)
    }
    if series.count != 1 { series.append(("all", self.total)) }
    return LatencyPlot(title: self.report.plotTitle, series: series).svg
  }
}

extension LoadReport {
  fileprivate var plotTitle: String {
    String(
      format: "roster load: %@, %@, %.0f req/s over %.1f s",
      self.target,
      self.model,
      self.total.qps,
      self.seconds
    )
  }
}

/// Draws latency-by-percentile lines as SVG, with no scripts, fonts or links outside the file.
struct LatencyPlot {
  let title: String
  let series: [(name: String, histogram: Histogram<UInt64>)]

  private let width = 900.0
  private let height = 520.0
  private let left = 80.0
  private let right = 170.0
  private let top = 50.0
  private let bottom = 60.0
  /// The x axis ends at 99.999%, five nines.
  private let maxNines = 5.0
  private static let colors = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#333333",
  ]

  var svg: String {
    let curves = self.series.map { ($0.name, Self.curve($0.histogram)) }
    let highest = curves.flatMap { $0.1.map(\.milliseconds) }.max() ?? 1
    let yMax = Self.niceCeiling(Swift.max(highest, 0.001))
    let plotWidth = self.width - self.left - self.right
    let plotHeight = self.height - self.top - self.bottom
    func x(_ nines: Double) -> Double {
      self.left + Swift.min(nines, self.maxNines) / self.maxNines * plotWidth
    }
    func y(_ milliseconds: Double) -> Double {
      self.top + plotHeight - milliseconds / yMax * plotHeight
    }

    var out = """
      <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(self.width))" height="\(Int(self.height))" \
      viewBox="0 0 \(Int(self.width)) \(Int(self.height))" font-family="sans-serif" font-size="12">
      <rect width="100%" height="100%" fill="white"/>
      <text x="\(self.left)" y="24" font-size="15">\(Self.escape(self.title))</text>

      """
    // Grid and axes.
    for tick in 0 ... Int(self.maxNines) {
      let px = x(Double(tick))
      let label = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"][tick]
      out +=
        "<line x1=\"\(px)\" y1=\"\(self.top)\" x2=\"\(px)\" y2=\"\(self.top + plotHeight)\" stroke=\"#ddd\"/>\n"
      out +=
        "<text x=\"\(px)\" y=\"\(self.top + plotHeight + 18)\" text-anchor=\"middle\">\(label)</text>\n"
    }
    for step in 0 ... 5 {
      let value = yMax * Double(step) / 5
      let py = y(value)
      out +=
        "<line x1=\"\(self.left)\" y1=\"\(py)\" x2=\"\(self.left + plotWidth)\" y2=\"\(py)\" stroke=\"#ddd\"/>\n"
      out +=
        "<text x=\"\(self.left - 8)\" y=\"\(py + 4)\" text-anchor=\"end\">\(Self.label(value))</text>\n"
    }
    out +=
      "<text x=\"\(self.left + plotWidth / 2)\" y=\"\(self.height - 14)\" text-anchor=\"middle\">percentile</text>\n"
    out +=
      "<text transform=\"translate(20 \(self.top + plotHeight / 2)) rotate(-90)\" text-anchor=\"middle\">latency (ms)</text>\n"
    out +=
      "<rect x=\"\(self.left)\" y=\"\(self.top)\" width=\"\(plotWidth)\" height=\"\(plotHeight)\" fill=\"none\" stroke=\"#444\"/>\n"
    // One line per series, and its legend entry.
    for (index, (name, points)) in curves.enumerated() {
      let color = Self.colors[index % Self.colors.count]
      let path = points.map { String(format: "%.1f,%.1f", x($0.nines), y($0.milliseconds)) }.joined(
        separator: " "
      )
      out += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
      let ly = self.top + 10 + Double(index) * 20
      let lx = self.left + plotWidth + 16
      out +=
        "<line x1=\"\(lx)\" y1=\"\(ly)\" x2=\"\(lx + 24)\" y2=\"\(ly)\" stroke=\"\(color)\" stroke-width=\"3\"/>\n"
      out += "<text x=\"\(lx + 30)\" y=\"\(ly + 4)\">\(Self.escape(name))</text>\n"
    }
    out += "</svg>\n"
    return out
  }

  // MARK: - Private

  private struct Point {
    var nines: Double
    var milliseconds: Double
  }

  /// The histogram's percentile iteration, with percentiles as "nines": 90% is 1, 99% is 2.
  private static func curve(_ histogram: Histogram<UInt64>) -> [Point] {
    guard histogram.totalCount > 0 else { return [] }
    var points: [Point] = []
    for step in histogram.percentiles(ticksPerHalfDistance: 5) {
      let fraction = Swift.min(step.percentileLevelIteratedTo / 100, 0.999_999)
      points.append(Point(nines: -log10(1 - fraction), milliseconds: Double(step.value) / 1_000))
    }
    return points
  }

  private static func niceCeiling(_ value: Double) -> Double {
    let magnitude = pow(10, floor(log10(value)))
    for factor in [1.0, 2, 2.5, 5, 10] where factor * magnitude >= value {
      return factor * magnitude
    }
    return 10 * magnitude
  }

  private static func label(_ milliseconds: Double) -> String {
    milliseconds >= 10 ? String(format: "%.0f", milliseconds) : String(format: "%.2f", milliseconds)
  }

  private static func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;")
  }
}
