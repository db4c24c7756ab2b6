import ArgumentParser
import Dispatch
import Foundation
import GRPCCore
import NIOCore
import NIOPosix
import RosterLoad
import RosterServices

/// `roster load`: the bundled load generator, with scenarios per RPC family, closed or open
/// loop, HdrHistogram latencies and service-level gates.
struct Load: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Load-test a Roster server.",
    discussion: """
      Scenarios: get, list, stream, search, picture (the full picture), thumbnail, analytics \
      and write. `write` updates and creates employees, so run it against a disposable \
      database. The guids, names and departments come from the service itself.

      Closed loop (--concurrency) keeps N requests in flight. Open loop (--rate) sends at a \
      constant rate and measures latency from each request's intended send time, so a stalled \
      server cannot hide its queue (coordinated omission is corrected).

      Example: roster load --mix get=60,list=25,picture=8,analytics=5,write=2 --duration 30s \
      --plot out.svg --max-p99 5ms --max-error-rate 0.1%
      """
  )

  @OptionGroup var connection: ConnectionOptions

  @Argument(
    help:
      "One scenario to run: get, list, stream, search, picture, thumbnail, analytics or write; or use --mix."
  )
  var scenario: String?

  @Option(help: "Weighted scenarios, such as get=60,list=25,picture=8,analytics=5,write=2.")
  var mix: String?

  @Option(help: "Closed loop: requests in flight (default: connections x streams).")
  var concurrency: Int?

  @Option(help: "Open loop: a constant arrival rate, such as 2000 or 2000/s.")
  var rate: String?

  @Option(help: "HTTP/2 connections; requests are spread over them.")
  var connections = 1

  @Option(
    help: "Closed loop: concurrent streams per connection (default 16, or from --concurrency)."
  )
  var streams: Int?

  @Option(help: "Open loop: the most requests in flight before sending waits.")
  var maxInFlight = 10_000

  @Option(help: "How long to measure, such as 30s or 2m (default 10s unless --requests).")
  var duration: String?

  @Option(help: "How many requests to measure, instead of --duration.")
  var requests: Int?

  @Option(help: "Load sent before measuring, and not counted.")
  var warmup = "1s"

  @Option(help: "Rows per list, search and stream page.")
  var pageSize = 50

  @Option(help: "Employee fields the reads ask for, comma-separated (default: all).")
  var readMask: String?

  @Option(help: "Pages a stream request reads before it stops.")
  var streamPages = 10

  @Option(help: "Employees kept from discovery (a uniform sample).")
  var discoverLimit = 10_000

  @Option(help: "Seed of the random choices.")
  var seed: UInt64 = 1

  @Option(help: "The author the write scenario records (x-roster-author).")
  var author = "roster-load"

  @Option(help: "Write the report as JSON to this file.")
  var json: String?

  @Option(help: "Write a latency-by-percentile SVG plot to this file.")
  var plot: String?

  @Option(help: "Write HdrHistogram's percentile distribution (.hgrm, in ms) to this file.")
  var hgrm: String?

  @Option(help: "Gate: fail (exit 3) if p99 latency is above this, such as 5ms.")
  var maxP99: String?

  @Option(help: "Gate: fail (exit 3) if the error rate is above this, such as 0.1%.")
  var maxErrorRate: String?

  @Option(help: "Gate: fail (exit 3) if total QPS is below this.")
  var minQps: Double?

  @Flag(help: "Send unary calls through grpc-swift's client too (always so with TLS).")
  var grpcSwiftClient = false

  @Option(help: "Client threads: the event loops, which also run the load's own tasks.")
  var threads = 1

  @Flag(help: "No progress lines.")
  var quiet = false

  func validate() throws {
    if self.scenario != nil && self.mix != nil {
      throw ValidationError("give a scenario or --mix, not both")
    }
    if self.concurrency != nil && self.rate != nil {
      throw ValidationError("--concurrency (closed loop) and --rate (open loop) exclude each other")
    }
    if self.duration != nil && self.requests != nil {
      throw ValidationError("--duration and --requests exclude each other")
    }
    if self.connections < 1 { throw ValidationError("--connections must be at least 1") }
    if let streams = self.streams, streams < 1 {
      throw ValidationError("--streams must be at least 1")
    }
    if let concurrency = self.concurrency, concurrency < 1 {
      throw ValidationError("--concurrency must be at least 1")
    }
    if let requests = self.requests, requests < 1 {
      throw ValidationError("--requests must be at least 1")
    }
    if !(1 ... 1_000).contains(self.pageSize) {
      throw ValidationError("--page-size must be 1 to 1000")
    }
    if self.streamPages < 1 { throw ValidationError("--stream-pages must be at least 1") }
    if self.discoverLimit < 1 { throw ValidationError("--discover-limit must be at least 1") }
    if self.maxInFlight < 1 { throw ValidationError("--max-in-flight must be at least 1") }
    if !(1 ... 64).contains(self.threads) { throw ValidationError("--threads must be 1 to 64") }
    _ = try self.makeConfiguration()
    _ = try self.gates()
  }

  func run() async throws {
    // The client's tasks run on its event loops, as a C client runs on its own: without a hop
    // to Swift's global pool and back for every call, a request costs several times less CPU
    // (measured by scripts/bench-load-accuracy), and the CPU left is the server's.
    NIOSingletons.groupLoopCountSuggestion = self.threads
    NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    let configuration = try self.makeConfiguration()
    let gates = try self.gates()
    if configuration.mix.scenarios.contains(.write) {
      Self.status(
        "note: the write scenario updates and creates employees on \(self.connection.target)"
      )
    }
    let stop = LoadStop()
    let interrupt = Self.onInterrupt { stop.stop() }
    defer { interrupt.cancel() }

    let live = !self.quiet
    let terminal = isatty(STDERR_FILENO) == 1
    let started = ContinuousClock.now
    let runner = LoadRunner(configuration: configuration)
    var result = try await runner.run(
      stop: stop,
      discovered: { seen in
        if live {
          let seconds = (ContinuousClock.now - started).seconds
          Self.status("discovered \(seen) employees in \(String(format: "%.1f", seconds)) s")
        }
      },
      progress: { progress in
        guard live, terminal || Int(progress.elapsed.rounded()) % 5 == 0 else { return }
        let line = Self.progressLine(progress)
        if terminal {
          FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        } else {
          Self.status(line)
        }
      }
    )
    if live && terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }

    let passed = result.report.check(gates)
    print(result.report.text)
    if let path = self.json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
      try encoder.encode(result.report).write(to: URL(fileURLWithPath: path))
    }
    if let path = self.plot {
      try result.latencyPlot.write(toFile: path, atomically: true, encoding: .utf8)
    }
    if let path = self.hgrm {
      try result.hgrm.write(toFile: path, atomically: true, encoding: .utf8)
    }
    if !passed { throw ExitCode(3) }
  }

  // MARK: - Private

  private func makeConfiguration() throws -> LoadConfiguration {
    do {
      var configuration = LoadConfiguration(target: try self.connection.resolvedTarget())
      configuration.transportSecurity = self.connection.transportSecurity
      configuration.callOptions = self.connection.callOptions
      configuration.metadata = [AuthorInterceptor.metadataKey: .string(self.author)]
      if let token = self.connection.token {
        configuration.metadata.addString("Bearer \(token)", forKey: AuthInterceptor.metadataKey)
      }
      configuration.leanUnary = !self.grpcSwiftClient && !self.connection.usesTLS
      configuration.connections = self.connections
      if let rate = self.rate {
        configuration.model = .open(
          rate: try LoadParsing.rate(rate, flag: "--rate"),
          maxInFlight: self.maxInFlight
        )
      } else {
        let concurrency = self.concurrency ?? self.connections * (self.streams ?? 16)
        if let streams = self.streams, self.concurrency != nil,
          streams * self.connections != concurrency
        {
          throw LoadError(
            "--concurrency \(concurrency) is not --connections x --streams; give one or the other"
          )
        }
        configuration.model = .closed(concurrency: concurrency)
      }
      if let requests = self.requests {
        configuration.length = .requests(requests)
      } else {
        let duration = try LoadParsing.duration(self.duration ?? "10s", flag: "--duration")
        guard duration > .zero else { throw LoadError("--duration must be above zero") }
        configuration.length = .duration(duration)
      }
      configuration.warmup = try LoadParsing.duration(self.warmup, flag: "--warmup")
      configuration.mix = try Mix(parsing: self.mix ?? self.scenario ?? "get")
      configuration.pageSize = self.pageSize
      configuration.readMask = self.readMask.map { $0.split(separator: ",").map(String.init) } ?? []
      configuration.streamPages = self.streamPages
      configuration.discoverLimit = self.discoverLimit
      configuration.seed = self.seed
      return configuration
    } catch let error as LoadError {
      throw ValidationError(error.description)
    }
  }

  private func gates() throws -> [Gate] {
    do {
      var gates: [Gate] = []
      if let text = self.maxP99 {
        gates.append(.maxP99(try LoadParsing.duration(text, flag: "--max-p99")))
      }
      if let text = self.maxErrorRate {
        gates.append(.maxErrorRate(try LoadParsing.fraction(text, flag: "--max-error-rate")))
      }
      if let qps = self.minQps { gates.append(.minQPS(qps)) }
      return gates
    } catch {
      throw ValidationError(error.description)
    }
  }

  private static func progressLine(_ progress: LoadProgress) -> String {
    let phase = progress.warmingUp ? "warm-up" : "measuring"
    return String(
      format: "%6.1f s  %@  %8.0f req/s  p50 %@  p99 %@  in flight %d  requests %d  errors %d",
      progress.elapsed,
      phase,
      progress.qps,
      Self.milliseconds(progress.p50),
      Self.milliseconds(progress.p99),
      progress.inFlight,
      progress.requests,
      progress.errors
    )
  }

  private static func milliseconds(_ microseconds: UInt64) -> String {
    String(format: "%.2fms", Double(microseconds) / 1_000)
  }

  private static func status(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
  }

  /// Ends the run on the first Ctrl-C (the report still prints); a second one exits at once.
  private static func onInterrupt(
    _ handler: @escaping @Sendable () -> Void
  ) -> any DispatchSourceSignal {
    signal(SIGINT, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler {
      handler()
      signal(SIGINT, SIG_DFL)
    }
    source.resume()
    return source
  }
}
