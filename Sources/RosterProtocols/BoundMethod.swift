package import GRPCCore

/// A method bound to its service's handler, known by its descriptor: a unary method of the
/// fast path or a streaming method of the Connect protocol and gRPC-Web.
///
/// Each service's methods are bound by generated code (`Generated/Bindings.swift`, from
/// `scripts/generate-bindings`), as grpc-swift's generated `registerMethods(with:)` binds them
/// for its router; the composition root puts a few hand-made bindings in their place.
package protocol BoundMethod: Sendable {
  var descriptor: MethodDescriptor { get }
}

extension UnaryFastPath.Method: BoundMethod {}
extension StreamingMethod: BoundMethod {}

extension Array where Element: BoundMethod {
  /// These methods in their order, each of `replacements` in the place of the method with its
  /// descriptor.
  ///
  /// - Precondition: every replacement's method is among these, once.
  package func replacing(with replacements: [Element]) -> [Element] {
    let byDescriptor = Dictionary(
      replacements.map { ($0.descriptor, $0) },
      uniquingKeysWith: { first, _ in
        preconditionFailure("\(first.descriptor) is replaced twice")
      }
    )
    for replacement in replacements {
      precondition(
        contains { $0.descriptor == replacement.descriptor },
        "\(replacement.descriptor) replaces a method no service binds"
      )
    }
    return map { byDescriptor[$0.descriptor] ?? $0 }
  }
}
