import Foundation

/// One hand-written parser under fuzzing: what it is fed, and what must hold after each input
/// (a failed check is a crash, which libFuzzer reports with the input that caused it).
struct FuzzTarget: Sendable {
  let name: String
  let run: @Sendable (UnsafeBufferPointer<UInt8>) -> Void

  static let all: [FuzzTarget] = [
    FuzzTarget(name: "connection", run: TransportTargets.connection),
    FuzzTarget(name: "request-head", run: TransportTargets.requestHead),
    FuzzTarget(name: "grpc-messages", run: TransportTargets.grpcMessages),
    FuzzTarget(name: "envelopes", run: ProtocolTargets.envelopes),
    FuzzTarget(name: "get-query", run: ProtocolTargets.getQuery),
    FuzzTarget(name: "json-request", run: ProtocolTargets.jsonRequest),
    FuzzTarget(name: "tokens", run: TokenTargets.tokens),
    FuzzTarget(name: "seed", run: ImportTargets.seed),
    FuzzTarget(name: "sales-csv", run: ImportTargets.salesCSV),
    FuzzTarget(name: "put-picture", run: PictureTargets.putPicture),
  ]

  /// The target `ROSTER_FUZZ_TARGET` names, for libFuzzer's runs.
  static let selected: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["ROSTER_FUZZ_TARGET"] ?? ""
    guard let target = Self.all.first(where: { $0.name == name }) else {
      Self.exit("ROSTER_FUZZ_TARGET must be one of: \(Self.all.map(\.name).joined(separator: " "))")
    }
    return target
  }()

  /// `TARGET FILE...`: each file through the target once; `--list` names the targets.
  static func replay(_ arguments: [String]) {
    if arguments == ["--list"] {
      print(Self.all.map(\.name).joined(separator: "\n"))
      return
    }
    guard let name = arguments.first, let target = Self.all.first(where: { $0.name == name })
    else {
      Self.exit("usage: roster-fuzz TARGET FILE...  (or --list)")
    }
    for path in arguments.dropFirst() {
      guard let data = FileManager.default.contents(atPath: path) else {
        Self.exit("cannot read \(path)")
      }
      Array(data).withUnsafeBufferPointer { target.run($0) }
    }
    print("\(name): \(arguments.count - 1) inputs replayed")
  }

  static func exit(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    Foundation.exit(2)
  }
}

/// Reads a fuzz input as the choices and pieces a target is made of. Past the end, every
/// read gives zeros or nothing, so any input is a complete one.
struct FuzzInput {
  private var bytes: ArraySlice<UInt8>

  init(_ bytes: UnsafeBufferPointer<UInt8>) {
    self.bytes = ArraySlice(bytes)
  }

  var isEmpty: Bool { self.bytes.isEmpty }

  mutating func byte() -> UInt8 {
    self.bytes.popFirst() ?? 0
  }

  /// A choice among `count`.
  mutating func choice(_ count: Int) -> Int {
    Int(self.byte()) % count
  }

  /// Up to `most` bytes, as many as the next byte says (1 ... most).
  mutating func piece(most: Int) -> ArraySlice<UInt8> {
    let count = min(1 + Int(self.byte()) % most, self.bytes.count)
    defer { self.bytes.removeFirst(count) }
    return self.bytes.prefix(count)
  }

  /// The bytes up to the next `separator` (which is dropped), or the rest.
  mutating func field(until separator: UInt8) -> ArraySlice<UInt8> {
    let end = self.bytes.firstIndex(of: separator) ?? self.bytes.endIndex
    defer { self.bytes = self.bytes[min(end + 1, self.bytes.endIndex)...] }
    return self.bytes[..<end]
  }

  mutating func rest() -> ArraySlice<UInt8> {
    defer { self.bytes = [] }
    return self.bytes
  }
}

/// A check that must hold for every input: a failure stops the run with `message`.
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
  if !condition() {
    FileHandle.standardError.write(Data(("fuzz check failed: " + message() + "\n").utf8))
    abort()
  }
}
