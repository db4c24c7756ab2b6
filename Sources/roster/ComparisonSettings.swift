import ArgumentParser
import Foundation
import RosterSQLite
import RosterServer

/// The settings that exist only to measure a design choice against its alternative, or to
/// test one path against another: never an operator's choice, so not flags. `ROSTER_COMPARE`
/// lists them, separated by commas or spaces (docs/performance.md, "Comparison settings"):
///
/// ```sh
/// ROSTER_COMPARE=no-fast-unary roster serve
/// ```
struct ComparisonSettings: Equatable {
  /// The environment variable that names the settings.
  static let variable = "ROSTER_COMPARE"

  /// The settings this process's environment names.
  static var current: ComparisonSettings {
    get throws { try ComparisonSettings(ProcessInfo.processInfo.environment[Self.variable]) }
  }

  var fastUnary = true

  /// The settings `text` names; a word it does not know is an error that lists the ones it does.
  init(_ text: String?) throws {
    let words = (text ?? "").split(whereSeparator: { $0 == "," || $0 == " " })
    for word in words {
      switch word {
      case "no-fast-unary": self.fastUnary = false
      default:
        throw ValidationError(
          "\(Self.variable): unknown setting '\(word)' (known: \(Self.known.joined(separator: ", ")))"
        )
      }
    }
  }

  static let known = [
    "no-fast-unary"
  ]

  /// Applies the settings to `config`.
  func apply(to config: inout ServerConfig) {
    config.fastUnaryPath = self.fastUnary
  }
}
