internal import CVipsShim
internal import Crypto
package import Foundation
internal import Synchronization

/// libvips through the C shim: thumbnails and synthetic demo pictures. Every call blocks and
/// burns CPU, so callers run it on a `BlockingPool`, never on a request thread.
package enum Vips {
  /// A JPEG thumbnail, and the size of the picture it was made from.
  package struct Thumbnail: Sendable, Hashable {
    package var data: [UInt8]
    package var width: Int
    package var height: Int
    package var sourceWidth: Int
    package var sourceHeight: Int
  }

  /// Why libvips refused: its own message, for logs only (it can name a server path).
  package struct Failure: Error, CustomStringConvertible {
    package var description: String
  }

  /// The NUL-terminated text in a C buffer.
  private static func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  private static let started: Result<Void, Failure> = {
    var error = [CChar](repeating: 0, count: 512)
    if roster_vips_start(&error, error.count) != 0 {
      return .failure(Failure(description: Self.text(error)))
    }
    return .success(())
  }()

  /// Decodes the whole picture at `path` (so a truncated or corrupt one fails) and makes a
  /// JPEG thumbnail `height` pixels high, using shrink-on-load.
  package static func thumbnail(
    path: String,
    height: Int,
    quality: Int
  ) throws(Failure) -> Thumbnail {
    try self.started.get()
    var out = roster_thumbnail()
    var error = [CChar](repeating: 0, count: 512)
    guard roster_vips_thumbnail(path, Int32(height), Int32(quality), &out, &error, error.count) == 0
    else {
      throw Failure(description: Self.text(error))
    }
    defer { roster_vips_free(out.data) }
    let bytes = [UInt8](UnsafeRawBufferPointer(start: out.data, count: out.size))
    return Thumbnail(
      data: bytes,
      width: Int(out.thumbnail_width),
      height: Int(out.thumbnail_height),
      sourceWidth: Int(out.width),
      sourceHeight: Int(out.height)
    )
  }

  /// A deterministic synthetic JPEG: the same arguments always give the same bytes. More
  /// `noise` (0 to 100) makes a larger file.
  package static func syntheticJPEG(
    width: Int,
    height: Int,
    seed: UInt32,
    noise: Double,
    quality: Int = 85
  ) throws(Failure) -> [UInt8] {
    try self.started.get()
    var data: UnsafeMutableRawPointer? = nil
    var size = 0
    var error = [CChar](repeating: 0, count: 512)
    guard
      roster_vips_synthetic_jpeg(
        Int32(width),
        Int32(height),
        seed,
        noise,
        Int32(quality),
        &data,
        &size,
        &error,
        error.count
      ) == 0
    else {
      throw Failure(description: Self.text(error))
    }
    defer { roster_vips_free(data) }
    return [UInt8](UnsafeRawBufferPointer(start: data, count: size))
  }
}

/// An incremental SHA-256 (swift-crypto's), as lowercase hex: picture etags.
package struct SHA256Hasher {
  private var hash = SHA256()

  package init() {}

  package mutating func update(_ bytes: UnsafeRawBufferPointer) {
    self.hash.update(bufferPointer: bytes)
  }

  package consuming func finish() -> String {
    Self.hexDigits(self.hash.finalize())
  }

  private static func hexDigits(_ digest: SHA256.Digest) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(SHA256.byteCount * 2)
    for byte in digest {
      text.append(digits[Int(byte >> 4)])
      text.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: text, as: UTF8.self)
  }

  /// The hex digest of `bytes`.
  package static func hex(_ bytes: some ContiguousBytes) -> String {
    var hasher = SHA256Hasher()
    bytes.withUnsafeBytes { hasher.update($0) }
    return hasher.finish()
  }
}

/// A fixed set of serial dispatch queues for blocking work (file I/O, libvips), so it never
/// runs on the cooperative pool or an event loop, and at most `width` such jobs run at once.
package final class BlockingPool: Sendable {
  private let queues: [DispatchQueue]
  private let next = Atomic<Int>(0)

  package init(label: String, width: Int) {
    self.queues = (0 ..< max(1, width)).map { DispatchQueue(label: "\(label).\($0)") }
  }

  package func run<T: Sendable, E: Error>(
    _ body: @escaping @Sendable () throws(E) -> T
  ) async throws(E)
    -> T
  {
    let index = self.next.add(1, ordering: .relaxed).oldValue % self.queues.count
    let result: Result<T, E> = await withCheckedContinuation { continuation in
      self.queues[index].async {
        continuation.resume(returning: Result { () throws(E) -> T in try body() })
      }
    }
    return try result.get()
  }
}

/// SHA-256 for callers outside the store (API token hashes), the same code as etags.
public enum Digest {
  /// The lowercase hex SHA-256 of `bytes`.
  public static func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256Hasher.hex(bytes)
  }
}
