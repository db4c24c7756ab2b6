import Foundation
import TestSupport
import Testing

/// `roster load` as an operator runs it: the binary, its files and its exit code.
@Suite("roster load, end to end", .timeLimit(.minutes(10)))
struct LoadCommandTests {
  /// Runs `roster load ARGUMENTS`, returning its exit code, stdout and stderr.
  static func load(
    _ arguments: [String]
  ) async throws -> (status: Int32, output: String, errors: String) {
    try await RosterProcess.run(["load"] + arguments)
  }

  @Test(
    "a mix against a demo server writes the JSON, the plot and the .hgrm, and gates the exit code"
  )
  func mixWithFilesAndGates() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let server = try await RosterProcess.serve(
      arguments: [
        "--db", directory + "/load.sqlite", "--seed-employees", "60", "--no-log-requests",
      ]
    )
    defer { _ = server.terminate() }

    let common = ["--target", server.address, "--warmup", "200ms", "--quiet"]
    let passing = try await Self.load(
      common + [
        "--mix", "get=60,list=25,picture=8,analytics=5,write=2", "--duration", "2s",
        "--concurrency", "4", "--json", directory + "/out.json", "--plot", directory + "/out.svg",
        "--hgrm", directory + "/out.hgrm", "--max-error-rate", "0%", "--max-p99", "10s",
      ]
    )
    #expect(passing.status == 0, "\(passing.output)\n\(passing.errors)")
    #expect(passing.output.contains("gate p99 ≤ 10.00s"))
    #expect(passing.output.contains("passed"))
    #expect(passing.errors.contains("note: the write scenario updates and creates employees"))

    let json = try JSONSerialization.jsonObject(
      with: Data(contentsOf: URL(fileURLWithPath: directory + "/out.json"))
    )
    let report = try #require(json as? [String: Any])
    let total = try #require(report["total"] as? [String: Any])
    #expect((total["requests"] as? Int ?? 0) > 20)
    #expect(total["errors"] as? Int == 0)
    let scenarios = try #require(report["scenarios"] as? [[String: Any]])
    #expect(
      Set(scenarios.compactMap { $0["scenario"] as? String }).isSuperset(of: ["get", "list"])
    )
    let svg = try String(contentsOfFile: directory + "/out.svg", encoding: .utf8)
    #expect(svg.hasPrefix("<svg") && svg.contains("<polyline"))
    let hgrm = try String(contentsOfFile: directory + "/out.hgrm", encoding: .utf8)
    #expect(hgrm.contains("#[Mean"))

    // A gate no server can meet fails the run with exit code 3, and says which gate.
    let failing = try await Self.load(common + ["get", "--requests", "50", "--max-p99", "1us"])
    #expect(failing.status == 3, "\(failing.output)\n\(failing.errors)")
    #expect(failing.output.contains("gate p99 ≤ 1µs"))
    #expect(failing.output.contains("FAILED"))

    // Bad flags are refused before any load, naming the flag.
    let bad = try await Self.load(common + ["--mix", "get=1,fetch=2"])
    #expect(bad.status != 0 && bad.status != 3)
    #expect(bad.errors.contains("--mix: unknown scenario 'fetch'"))
  }

  @Test("a server that is not there is an error, not a report")
  func unreachable() async throws {
    let result = try await Self.load([
      "--target", "127.0.0.1:1", "--requests", "5", "--quiet", "--warmup", "0s",
    ])
    #expect(result.status != 0 && result.status != 3)
    #expect(result.errors.lowercased().contains("unavailable"), "\(result.errors)")
  }
}
