// swift-tools-version:6.1
// Micro-benchmarks of the store's hot paths (ordo-one/package-benchmark): wall time and
// mallocs per operation, so that regressions show. A package of its own, so the test build
// never compiles the harness. Run: cd Benchmarks && swift package benchmark
import PackageDescription

let package = Package(
  name: "roster-benchmarks",
  platforms: [.macOS(.v15)],
  dependencies: [
    .package(name: "roster", path: ".."),
    .package(
      url: "https://github.com/ordo-one/package-benchmark.git",
      exact: "1.38.1",
      traits: ["MallocInterposer"]
    ),
  ],
  targets: [
    .executableTarget(
      name: "StoreBenchmarks",
      dependencies: [
        .product(name: "RosterSQLite", package: "roster"),
        .product(name: "Benchmark", package: "package-benchmark"),
      ],
      path: "StoreBenchmarks",
      swiftSettings: [.swiftLanguageMode(.v6)],
      plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
    )
  ]
)
