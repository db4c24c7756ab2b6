// swift-tools-version:6.1
// Builds the two protoc plugins from the pinned packages, for scripts/generate-protos only.
// CI never builds this package: the generated code is committed.
import PackageDescription

let package = Package(
  name: "protoc-plugins",
  dependencies: [
    .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
    .package(url: "https://github.com/grpc/grpc-swift-protobuf.git", exact: "2.4.1"),
  ],
  targets: []
)
