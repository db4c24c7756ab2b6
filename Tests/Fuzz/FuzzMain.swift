// The fuzz targets of Roster's hand-written parsers, in one executable (`scripts/fuzz`).
//
// Built with `--sanitize=fuzzer` (and `address`), libFuzzer's own `main` drives
// `LLVMFuzzerTestOneInput` with the target `ROSTER_FUZZ_TARGET` names; `scripts/fuzz` defines
// ROSTER_FUZZING for that build, so the package has no `main` of its own there. Built without
// it, as every build of the package does, `roster-fuzz TARGET FILE...` runs each file through
// the target once, which is how the test suite replays the corpus.

@_cdecl("LLVMFuzzerTestOneInput")
public func rosterFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  FuzzTarget.selected.run(UnsafeBufferPointer(start: data, count: size))
  return 0
}

#if !ROSTER_FUZZING
@main
enum FuzzReplay {
  static func main() {
    FuzzTarget.replay(Array(CommandLine.arguments.dropFirst()))
  }
}
#endif
