// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [
  .swiftLanguageMode(.v6),
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("InternalImportsByDefault"),
  // An async function without an isolation of its own runs on its caller's executor rather
  // than hopping to the generic one: each hop of a call's task, which prefers its event loop,
  // takes the task's status lock (docs/performance.md, "What the fast path's parts saved",
  // one frame per call).
  .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let package = Package(
  name: "roster",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "roster", targets: ["roster"]),
    .library(name: "RosterServer", targets: ["RosterServer"]),
    // For Benchmarks/, a package of its own so that the test build never compiles the harness.
    .library(
      name: "RosterSQLite",
      targets: [
        "RosterSQLite", "RosterDomain", "RosterStore", "RosterSeed", "RosterImaging",
        "RosterPictures",
      ]
    ),
  ],
  dependencies: [
    .package(url: "https://github.com/grpc/grpc-swift-2.git", exact: "2.4.3"),
    .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", exact: "2.9.2"),
    .package(url: "https://github.com/grpc/grpc-swift-protobuf.git", exact: "2.4.1"),
    .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
    .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
    .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
    .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
    .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
    .package(url: "https://github.com/apple/swift-nio-http2.git", exact: "1.46.0"),
    .package(url: "https://github.com/apple/swift-nio-extras.git", exact: "1.35.2"),
    .package(url: "https://github.com/apple/swift-nio-ssl.git", exact: "2.37.6"),
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", exact: "0.2.0"),
    .package(url: "https://github.com/apple/swift-crypto.git", exact: "4.5.2"),
    .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
    .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
    .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
    .package(url: "https://github.com/adam-fowler/compress-nio.git", exact: "1.5.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing.git", exact: "1.7.3"),
    // Tests only: property checks of the hand-written codecs against their libraries.
    .package(url: "https://github.com/x-sheep/swift-property-based.git", exact: "2.0.1"),
    // OTLP over gRPC only: the HTTP exporter would add async-http-client to every build.
    .package(
      url: "https://github.com/swift-otel/swift-otel.git",
      exact: "1.6.0",
      traits: ["OTLPGRPC"]
    ),
  ],
  targets: [
    // Generated messages and service stubs; nothing hand-written.
    .target(
      name: "RosterProto",
      dependencies: [
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
      ],
      // The services' generated protocols: a method without its own isolation runs where it is
      // called, as the services' own code does (`strict`), rather than hopping at each call.
      swiftSettings: [
        .swiftLanguageMode(.v6), .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
      ]
    ),
    // A small non-variadic C face on libvips (thumbnails, demo pictures), which it opens on
    // first use (Debian's libvips42); nothing links libvips.
    .target(name: "CVipsShim"),
    // Thread names and per-thread priority (nice, SCHED_IDLE), which need _GNU_SOURCE; the
    // lock annotations ThreadSanitizer reads (`RosterLocks`).
    .target(name: "CThreadShim"),
    // The lock every module uses: Synchronization's Mutex, its acquires and releases told to
    // ThreadSanitizer (which does not see Mutex on Linux).
    .target(name: "RosterLocks", dependencies: ["CThreadShim"], swiftSettings: strict),
    // jemalloc's options for the `roster` executable (`malloc_conf`); linked into it alone.
    .target(name: "CAllocatorConfig"),
    // Entities, filters, cursors, validation, limits, dates and errors: plain Swift, no
    // database and no gRPC.
    .target(
      name: "RosterDomain",
      dependencies: ["RosterLocks"],
      swiftSettings: strict
    ),
    // The store seam: the async protocols the services call, and a backend's lifecycle as a
    // `Service`. No implementation.
    .target(
      name: "RosterStore",
      dependencies: [
        "RosterLocks",
        "RosterDomain",
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ],
      swiftSettings: strict
    ),
    // Thumbnails and synthetic pictures through libvips (opened on first use), and SHA-256.
    .target(
      name: "RosterImaging",
      dependencies: [
        "CVipsShim",
        .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: strict
    ),
    // Pictures apart from the rows: the upload pipeline, content-addressed files, the cache
    // and the sweep. A backend supplies the metadata (`PictureCatalog`).
    .target(
      name: "RosterPictures",
      dependencies: [
        "RosterLocks",
        "RosterDomain",
        "RosterStore",
        "RosterImaging",
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: strict
    ),
    // Demo data, the seed and sales file formats, and the one import path (`DirectoryLoader`)
    // that `roster import` and first-start seeding share.
    .target(
      name: "RosterSeed",
      dependencies: ["RosterDomain", "RosterStore", "RosterPictures", "RosterImaging"],
      swiftSettings: strict
    ),
    // The SQLite backend on GRDB: schema, migrations, SQL, the coalescing writer, lanes,
    // picture files. Never sees gRPC.
    .target(
      name: "RosterSQLite",
      dependencies: [
        "RosterLocks",
        "RosterDomain",
        "RosterStore",
        "RosterPictures",
        "CThreadShim",
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "GRDBSQLite", package: "GRDB.swift"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: strict
    ),
    // The PostgreSQL backend on postgres-nio, for replicas over one shared database: schema,
    // migrations under an advisory lock, SQL, group commit, the change feed over
    // LISTEN/NOTIFY, pictures in chunked rows. Never sees gRPC.
    .target(
      name: "RosterPostgres",
      dependencies: [
        "RosterLocks",
        "RosterDomain",
        "RosterStore",
        "RosterPictures",
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        // Its errors only: a pool that cannot open a connection fails leases with them.
        .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: strict
    ),
    // Signed-in callers: the JSON Web Tokens of an OpenID Connect provider checked against its
    // published keys, without a suspension, so the call path can check them. Never fetches.
    .target(
      name: "RosterIdentity",
      dependencies: [
        "RosterLocks",
        .product(name: "JWTKit", package: "jwt-kit"),
        .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: strict
    ),
    // One gRPC service per file, with proto <-> domain mapping, over the store protocols
    // only. Never sees SQL or a backend.
    .target(
      name: "RosterServices",
      dependencies: [
        "RosterLocks",
        "RosterProto",
        "RosterDomain",
        "RosterStore",
        "RosterIdentity",
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: strict
    ),
    // Builds the server from a config: transport, services, lifecycle.
    // Roster's gRPC transport on swift-nio-http2: connection management, the stream codec,
    // message compression. GRPCCore and NIO only; the server adds its fast path through a
    // per-connection hook.
    .target(
      name: "RosterTransport",
      dependencies: [
        "RosterLocks",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
        .product(name: "NIOHPACK", package: "swift-nio-http2"),
        .product(name: "NIOExtras", package: "swift-nio-extras"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "CompressNIO", package: "compress-nio"),
      ],
      swiftSettings: [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
    ),
    // The protocol layer: gRPC, gRPC-Web and the Connect protocol over Roster's transport, the
    // method tables' types, the web console's files. Knows the services' interceptors and
    // descriptors, never the store's backends.
    .target(
      name: "RosterProtocols",
      dependencies: [
        "RosterLocks",
        "RosterServices",
        "RosterDomain",
        "RosterStore",
        "RosterTransport",
        "RosterProto",
        "CThreadShim",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
        .product(name: "NIOHPACK", package: "swift-nio-http2"),
      ],
      // The web console's files, compiled into the binary (`WebConsole`): no build step, no
      // files to deploy beside it.
      resources: [
        .embedInCode("Console/index.html"),
        .embedInCode("Console/console.js"),
        .embedInCode("Console/console.css"),
      ],
      swiftSettings: strict
    ),
    // The composition root: configuration, the store opened, the services and their method
    // tables bound, the transport and the metrics endpoint started and stopped together.
    .target(
      name: "RosterServer",
      dependencies: [
        "RosterProtocols",
        "RosterServices",
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterPostgres",
        "RosterSeed",
        "RosterIdentity",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        "RosterTransport",
        "RosterProto",
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
      ],
      swiftSettings: strict
    ),
    // The load generator behind `roster load`, as a library. Never sees the store.
    .target(
      name: "RosterLoad",
      dependencies: [
        "RosterLocks",
        "RosterProto",
        "RosterDomain",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
        .product(name: "Histogram", package: "hdrhistogram-swift"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
      ],
      swiftSettings: strict
    ),
    // The executable: a thin @main plus one file per subcommand.
    .executableTarget(
      name: "roster",
      dependencies: [
        "RosterServer",
        "RosterProtocols",
        "RosterServices",
        "RosterDomain",
        "RosterSQLite",
        "RosterPostgres",
        "RosterStore",
        "RosterSeed",
        "RosterProto",
        "RosterLoad",
        "CAllocatorConfig",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "OTel", package: "swift-otel"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
      ],
      swiftSettings: strict,
      // jemalloc (Debian's libjemalloc) replaces glibc's malloc in the binary: GetEmployee ran
      // faster at less CPU per call (docs/performance.md, "Against grpc-go and C++ gRPC").
      linkerSettings: [.linkedLibrary("jemalloc")]
    ),
    // Measurements of the store in process (`scripts/bench-analytics`): a benchmark, so not a
    // command of `roster`.
    .executableTarget(
      name: "roster-measure",
      dependencies: [
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterPostgres",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      path: "Benchmarks/Measure",
      swiftSettings: strict
    ),
    // The fuzz targets of the hand-written parsers (`scripts/fuzz`): libFuzzer's when built
    // with `--sanitize=fuzzer`, a replayer of the corpus otherwise.
    .executableTarget(
      name: "roster-fuzz",
      dependencies: [
        "RosterDomain",
        "RosterProto",
        "RosterTransport",
        "RosterProtocols",
        "RosterServices",
        "RosterSeed",
        "RosterSQLite",
        "RosterStore",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOEmbedded", package: "swift-nio"),
        .product(name: "NIOHPACK", package: "swift-nio-http2"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
      ],
      path: "Tests/Fuzz",
      exclude: ["corpus", "make-corpus.py"],
      swiftSettings: strict
    ),
    // Helpers shared by the test targets.
    .target(
      name: "TestSupport",
      dependencies: [
        "RosterLocks",
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterPostgres",
        "RosterPictures",
        "RosterSeed",
        "RosterServer",
        "RosterServices",
        "RosterProto",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCInProcessTransport", package: "grpc-swift-2"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Tests/TestSupport",
      swiftSettings: strict
    ),
    // The store contract: every behaviour the services rely on, written once against the
    // store protocols, for every backend's tests to run.
    .target(
      name: "StoreContract",
      dependencies: ["RosterDomain", "RosterStore"],
      path: "Tests/StoreContract",
      swiftSettings: strict
    ),
    .testTarget(
      name: "RosterSQLiteTests",
      dependencies: [
        "RosterLocks",
        "StoreContract",
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterSeed",
        "TestSupport",
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "GRDBSQLite", package: "GRDB.swift"),
      ],
      swiftSettings: strict
    ),
    .testTarget(
      name: "RosterPostgresTests",
      dependencies: [
        "StoreContract",
        "RosterDomain",
        "RosterLocks",
        "RosterStore",
        "RosterPostgres",
        "RosterSeed",
        "TestSupport",
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strict
    ),
    .testTarget(
      name: "RosterServicesTests",
      dependencies: [
        "RosterLocks",
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "PropertyBased", package: "swift-property-based"),
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterPostgres",
        "RosterPictures",
        "RosterSeed",
        "RosterServices",
        "RosterServer",
        "RosterProtocols",
        "RosterIdentity",
        .product(name: "JWTKit", package: "jwt-kit"),
        "RosterProto",
        "TestSupport",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "GRPCInProcessTransport", package: "grpc-swift-2"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
      ],
      swiftSettings: strict
    ),
    // The transport's handlers on EmbeddedChannel with a manual clock, as
    // grpc-swift-nio-transport tests its own: GOAWAY, keepalive, pings, floods, messages.
    .testTarget(
      name: "RosterTransportTests",
      dependencies: [
        "RosterTransport",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOEmbedded", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
        .product(name: "NIOHPACK", package: "swift-nio-http2"),
        .product(name: "PropertyBased", package: "swift-property-based"),
      ]
    ),
    // The protocol layer's unit tests: its handlers on a testing channel, and its pieces that
    // need no connection (the Connect error table, JSON refusals, CORS, envelopes).
    .testTarget(
      name: "RosterProtocolsTests",
      dependencies: [
        "RosterProtocols",
        "RosterProto",
        "RosterServices",
        "RosterTransport",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOEmbedded", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ]
    ),
    // The domain's arithmetic, the seed format and the picture cache and files, each against
    // an independent answer (Foundation, a model) on random input.
    .testTarget(name: "RosterDomainTests", dependencies: ["RosterDomain", "RosterLocks"]),
    // Under `scripts/sanitize thread`, shows ThreadSanitizer sees `Locked`'s lock.
    .testTarget(name: "RosterLocksTests", dependencies: ["RosterLocks"], swiftSettings: strict),
    .testTarget(name: "RosterSeedTests", dependencies: ["RosterSeed", "RosterDomain"]),
    .testTarget(
      name: "RosterPicturesTests",
      dependencies: ["RosterPictures", "RosterImaging", "RosterDomain"]
    ),
    .testTarget(
      name: "RosterLoadTests",
      dependencies: [
        "RosterLoad",
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterSeed",
        "TestSupport",
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Histogram", package: "hdrhistogram-swift"),
      ],
      swiftSettings: strict
    ),
    .testTarget(
      name: "RosterEndToEndTests",
      dependencies: [
        "RosterLocks",
        "roster",
        "RosterServer",
        "RosterServices",
        "RosterTransport",
        "RosterDomain",
        "RosterStore",
        "RosterSQLite",
        "RosterPostgres",
        "RosterSeed",
        "RosterProto",
        "TestSupport",
        .product(name: "GRDB", package: "GRDB.swift"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "GRPCCore", package: "grpc-swift-2"),
        .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOEmbedded", package: "swift-nio"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
        .product(name: "NIOHPACK", package: "swift-nio-http2"),
        .product(name: "SwiftProtobuf", package: "swift-protobuf"),
      ],
      swiftSettings: strict
    ),
  ]
)
