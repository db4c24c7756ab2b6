internal import Foundation
import RosterLocks
internal import RosterSeed

/// The real `roster` binary, started as a child process for end-to-end tests.
///
/// ```swift
/// let server = try await RosterProcess.serve(arguments: ["--db", path])
/// defer { server.terminate() }
/// print(server.address)  // "127.0.0.1:40123"
/// ```
public final class RosterProcess: Sendable {
  /// The `HOST:PORT` the server printed.
  public let address: String
  /// The port part of `address`.
  public var port: Int { Int(self.address.split(separator: ":").last ?? "") ?? 0 }
  private let process: Process
  private let output: OutputBuffer

  /// Everything the server printed on stdout so far.
  final class OutputBuffer: Sendable {
    let text = Locked("")
  }

  /// The metrics URL the server printed, when started with `--metrics-port`.
  public var metricsURL: String? {
    self.output.text.withLock { text in
      text.split(separator: "\n").first { $0.hasPrefix("metrics on ") }.map {
        String($0.dropFirst(11))
      }
    }
  }

  private init(process: Process, address: String, output: OutputBuffer) {
    self.process = process
    self.address = address
    self.output = output
  }

  /// One demo picture pool for every server the tests start (`roster serve --demo-pictures`),
  /// in the build directory. Each server that seeded pictures made the pool afresh (about 7 s
  /// of libvips CPU in a debug build), and with the servers of a full run starting at once that
  /// saturated a 2-core machine for the run's first minute, delaying the suites' timers by up
  /// to 12 s.
  ///
  /// The first server to start makes it, once, and the rest wait for it: on a clean checkout
  /// they all start together and would each make it again.
  static func demoPictures() async throws -> String {
    let path = Self.packageRoot.appendingPathComponent(".build/test-demo-pictures").path
    let making = Self.demoPicturesMade.withLock { task in
      if let task { return task }
      let made = Task { _ = try await Self.offPool { try DemoPictures.writePool(to: path) } }
      task = made
      return made
    }
    try await making.value
    return path
  }

  /// Whether `roster serve ARGUMENTS` seeds demo pictures (a new database, with
  /// `--seed-employees` other than 0, by default 1,000, and no `--no-seed-pictures`).
  static func seedsPictures(_ arguments: [String]) -> Bool {
    let employees = arguments.firstIndex(of: "--seed-employees").flatMap {
      arguments.dropFirst($0 + 1).first
    }
    return employees != "0" && !arguments.contains("--no-seed-pictures")
  }

  private static let demoPicturesMade = Locked<Task<Void, any Error>?>(nil)

  /// Path of the built `roster` executable: `ROSTER_BINARY`, or beside the test bundle.
  public static var binaryPath: String {
    if let path = ProcessInfo.processInfo.environment["ROSTER_BINARY"] { return path }
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let beside = bundle.appendingPathComponent("roster").path
    if FileManager.default.isExecutableFile(atPath: beside) { return beside }
    return Self.packageRoot.appendingPathComponent(".build/debug/roster").path
  }

  /// The package's root directory (this file is `Tests/TestSupport/RosterProcess.swift`).
  private static var packageRoot: URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
  }

  /// The server's process id.
  public var processIdentifier: Int32 { self.process.processIdentifier }

  /// Starts `roster serve --port 0 …` and waits for its "listening on" line; through
  /// `launcher` when given (a command that execs the rest, such as `taskset -c 0`), with
  /// `environment` added to this process's.
  public static func serve(
    arguments: [String],
    launcher: [String] = [],
    environment: [String: String] = [:],
    timeout: Duration = .seconds(60)
  ) async throws -> RosterProcess {
    let process = Process()
    if !environment.isEmpty {
      process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    var command = launcher + [self.binaryPath, "serve", "--port", "0"]
    if Self.seedsPictures(arguments) {
      command += ["--demo-pictures", try await Self.demoPictures()]
    }
    command += arguments
    process.executableURL = URL(fileURLWithPath: command[0])
    process.arguments = Array(command.dropFirst())
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let buffer = OutputBuffer()
    output.fileHandleForReading.readabilityHandler = { handle in
      let chunk = String(decoding: handle.availableData, as: UTF8.self)
      buffer.text.withLock { $0 += chunk }
    }
    try process.run()
    let deadline = ContinuousClock.now + timeout
    // The line is looked for once more after the deadline or the exit: a test process whose
    // threads were all busy may wake this task only after the deadline, long after the line came.
    var last = false
    while !last {
      last = ContinuousClock.now >= deadline || !process.isRunning
      let text = buffer.text.withLock { $0 }
      if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
        return RosterProcess(process: process, address: String(line.dropFirst(13)), output: buffer)
      }
      if !last { try await Task.sleep(for: .milliseconds(50)) }
    }
    process.terminate()
    throw CocoaError(.executableLoad, userInfo: ["output": buffer.text.withLock { $0 }])
  }

  /// Runs `roster ARGUMENTS` to completion, with `environment` added to this process's: its exit
  /// status, standard output and standard error. It waits on a thread of its own (`offPool`).
  ///
  /// ```swift
  /// let (status, output, _) = try await RosterProcess.run(["list", "--target", server.address])
  /// ```
  public static func run(
    _ arguments: [String],
    environment: [String: String] = [:]
  ) async throws -> (status: Int32, output: String, errors: String) {
    try await Self.offPool { try Self.runBlocking(arguments, environment: environment) }
  }

  /// Runs `body`, which blocks (a child process, a pipe read to its end), on a Dispatch thread,
  /// never on one of the cooperative pool's threads: every suite's tasks share that pool (two
  /// threads on a 2-core machine), and each blocked thread stalls every other test's clients and
  /// timers while it waits.
  public static func offPool<Result: Sendable>(
    _ body: @escaping @Sendable () throws -> Result
  ) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
      DispatchQueue.global().async { continuation.resume(with: Swift.Result(catching: body)) }
    }
  }

  private static func runBlocking(
    _ arguments: [String],
    environment: [String: String]
  ) throws -> (status: Int32, output: String, errors: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: self.binaryPath)
    process.arguments = arguments
    if !environment.isEmpty {
      process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Standard error drains alongside standard output, so neither pipe fills and stalls the child.
    let errorText = OutputBuffer()
    let drained = DispatchGroup()
    DispatchQueue.global().async(group: drained) {
      let data = errors.fileHandleForReading.readDataToEndOfFile()
      errorText.text.withLock { $0 = String(decoding: data, as: UTF8.self) }
    }
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    drained.wait()
    process.waitUntilExit()
    return (
      process.terminationStatus,
      String(decoding: outputData, as: UTF8.self),
      errorText.text.withLock { $0 }
    )
  }

  /// The server's process id.
  public var pid: Int32 { self.process.processIdentifier }

  /// The text of the server's `/proc/PID/NAME` (`status`, `maps`, ...), read to the end:
  /// `/proc` files report a size of 0, and `String(contentsOfFile:)` returned only the first
  /// part of a `maps` longer than a page.
  public func procFile(_ name: String) throws -> String {
    let path = "/proc/\(self.process.processIdentifier)/\(name)"
    guard let file = FileHandle(forReadingAtPath: path) else {
      throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
    }
    defer { try? file.close() }
    return String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
  }

  /// The server's resident memory now and at its peak, in bytes, from `/proc`.
  public func memory() throws -> (resident: Int, peak: Int) {
    let status = try self.procFile("status")
    func field(_ name: String) -> Int {
      let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
      return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
    return (field("VmRSS"), field("VmHWM"))
  }

  /// Resets the peak the kernel keeps (`VmHWM`) to the current resident size.
  public func resetPeakMemory() throws {
    try "5".write(
      toFile: "/proc/\(self.process.processIdentifier)/clear_refs",
      atomically: false,
      encoding: .utf8
    )
  }

  /// Sends SIGKILL, as a crash or power cut would end it, and waits until it is gone.
  public func kill() {
    if self.process.isRunning {
      Foundation.kill(self.process.processIdentifier, SIGKILL)
    }
    self.process.waitUntilExit()
  }

  /// Sends SIGTERM and waits for the exit status.
  @discardableResult
  public func terminate() -> Int32 {
    if self.process.isRunning { self.process.terminate() }
    self.process.waitUntilExit()
    return self.process.terminationStatus
  }
}
