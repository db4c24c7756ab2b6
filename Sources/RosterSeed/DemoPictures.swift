internal import Foundation
internal import RosterDomain
internal import RosterImaging

/// Deterministic synthetic JPEG pictures for demo data, tests and benchmarks.
///
/// Demo employees share a pool of pictures of realistic sizes, from 800 x 800 at tens of KB
/// to 4000 x 3000 at several MB; about one employee in six has none. Sharing the pool keeps
/// seeding fast, and is what content addressing stores once.
public enum DemoPictures {
  /// Width, height and noise of each picture in the pool.
  public static let pool: [(width: Int, height: Int, noise: Double)] = [
    (800, 800, 2), (800, 800, 12), (960, 720, 6), (1024, 768, 20), (1080, 1080, 4),
    (1200, 900, 10), (1200, 1200, 25), (1280, 960, 3), (1600, 1200, 8), (1600, 1200, 30),
    (1920, 1080, 5), (2048, 1536, 15), (2400, 1600, 8), (3000, 2000, 12), (3264, 2448, 6),
    (4000, 3000, 20),
  ]

  /// The file name of pool picture `index`.
  public static func fileName(_ index: Int) -> String {
    "picture-\(index < 10 ? "0" : "")\(index).jpg"
  }

  /// The pool picture of demo employee `index`, or nil for the one in six with none.
  public static func fileName(forEmployee index: Int) -> String? {
    var random = SplitMix64(seed: 0x9C7 &+ UInt64(index))
    let draw = random.next()
    if draw % 6 == 0 { return nil }
    return self.fileName(Int((draw / 6) % UInt64(self.pool.count)))
  }

  /// Writes the pool's pictures that are missing from `directory`.
  ///
  /// - Returns: how many it wrote.
  @discardableResult
  public static func writePool(to directory: String) throws -> Int {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var written = 0
    for (index, picture) in self.pool.enumerated() {
      let path = "\(directory)/\(self.fileName(index))"
      if FileManager.default.fileExists(atPath: path) { continue }
      let bytes = try self.jpeg(
        width: picture.width,
        height: picture.height,
        seed: UInt32(index) &* 2_654_435_761,
        noise: picture.noise
      )
      try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
      written += 1
    }
    return written
  }

  /// A JPEG of `width` by `height`: a gradient tinted by `seed` plus noise. The same
  /// arguments always give the same bytes; more `noise` (0 to 100) makes a larger file.
  ///
  /// - Throws: `StoreError.invalidArgument` if libvips cannot make it (a size of zero).
  public static func jpeg(
    width: Int,
    height: Int,
    seed: UInt32,
    noise: Double = 20,
    quality: Int = 85
  ) throws -> [UInt8] {
    do {
      return try Vips.syntheticJPEG(
        width: width,
        height: height,
        seed: seed,
        noise: noise,
        quality: quality
      )
    } catch {
      throw StoreError(.invalidArgument, "demo picture could not be made: \(error)")
    }
  }
}
