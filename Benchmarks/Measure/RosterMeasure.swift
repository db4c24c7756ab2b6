import ArgumentParser

/// `roster-measure`: measurements of the store in process, which `scripts/bench-analytics`
/// runs. Kept out of `roster`: they are benchmarks, not an operator's commands.
@main
struct RosterMeasure: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "roster-measure",
    abstract: "Time the store's reads in process on a database.",
    subcommands: [MeasureAnalytics.self, MeasureAggregates.self]
  )
}

extension Duration {
  /// The duration in seconds, fractions included.
  var seconds: Double {
    let (seconds, attoseconds) = self.components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
