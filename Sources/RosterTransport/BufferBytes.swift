package import GRPCCore
package import NIOCore

/// A `ByteBuffer` as grpc-swift's message bytes, so serializing and deserializing copy nothing.
package struct BufferBytes: GRPCContiguousBytes, Sendable {
  package var buffer: ByteBuffer

  package init(_ buffer: ByteBuffer) {
    self.buffer = buffer
  }

  package init(repeating byte: UInt8, count: Int) {
    self.buffer = ByteBuffer(repeating: byte, count: count)
  }

  package init<Bytes: Sequence>(_ sequence: Bytes) where Bytes.Element == UInt8 {
    self.buffer = ByteBuffer(bytes: sequence)
  }

  package var count: Int { self.buffer.readableBytes }

  package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    try self.buffer.withUnsafeReadableBytes(body)
  }

  package mutating func withUnsafeMutableBytes<R>(
    _ body: (UnsafeMutableRawBufferPointer) throws -> R
  ) rethrows -> R {
    try self.buffer.withUnsafeMutableReadableBytes(body)
  }
}
