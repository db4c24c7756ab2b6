import Foundation
import RosterDomain
import RosterImaging
import RosterPictures
import Testing

/// The picture cache against a plain model of least-recently-used eviction, and the picture
/// files' naming, installing and checking on a real directory.
@Suite("Picture cache and files")
struct PictureCacheAndFilesTests {
  /// The cache as a list in use order, oldest first: what `PictureCache` must hold.
  struct Model {
    let budget: Int
    var entries: [(etag: String, size: Int)] = []
    var bytes: Int { self.entries.reduce(0) { $0 + $1.size } }

    mutating func get(_ etag: String) -> Int? {
      guard let index = self.entries.firstIndex(where: { $0.etag == etag }) else { return nil }
      let entry = self.entries.remove(at: index)
      self.entries.append(entry)
      return entry.size
    }

    mutating func put(_ etag: String, size: Int) {
      guard size <= self.budget / 8 else { return }
      self.entries.removeAll { $0.etag == etag }
      self.entries.append((etag, size))
      while self.bytes > self.budget { self.entries.removeFirst() }
    }
  }

  @Test("random gets and puts leave the cache holding what an LRU model holds, within budget")
  func cacheMatchesTheModel() {
    var random = SplitMix64(seed: 0xCAC4E)
    for budget in [800, 4_096, 10_000] {
      let cache = PictureCache(budget: budget)
      var model = Model(budget: budget)
      let etags = (0 ..< 40).map { "picture-\($0)" }
      for _ in 0 ..< 5_000 {
        let etag = etags.randomElement(using: &random)!
        if Bool.random(using: &random) {
          // A size up to twice the largest entry: some are too large to cache at all.
          let size = Int.random(in: 0 ... budget / 4, using: &random)
          let bytes = [UInt8](repeating: UInt8(size % 251), count: size)
          cache.put(etag, bytes)
          model.put(etag, size: size)
        } else {
          let got = cache.get(etag)
          let expected = model.get(etag)
          #expect(got?.count == expected, "\(etag), budget \(budget)")
          if let got, let first = got.first { #expect(first == UInt8(got.count % 251)) }
        }
        #expect(cache.heldBytes == model.bytes)
        #expect(cache.heldBytes <= budget)
      }
    }
  }

  static func directory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("pictures-\(UUID())").path
  }

  /// Writes `bytes` through a temporary file and installs it under its SHA-256.
  static func install(_ bytes: [UInt8], in files: PictureFiles) throws -> String {
    let etag = Digest.sha256Hex(bytes)
    let (path, descriptor) = try files.createTemporary()
    defer { close(descriptor) }
    try bytes.withUnsafeBytes { try PictureFiles.write(descriptor: descriptor, $0) }
    try files.install(temporary: path, descriptor: descriptor, etag: etag)
    return etag
  }

  @Test("an installed file is found by its etag, read back whole, and checked by its hash")
  func installAndCheck() throws {
    let root = Self.directory()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let files = try PictureFiles(directory: root)
    let bytes = (0 ..< 300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let etag = try Self.install(bytes, in: files)
    #expect(PictureFiles.isEtag(etag))
    #expect(files.path(etag: etag) == "\(root)/\(etag.prefix(2))/\(etag)")
    #expect(files.problem(etag: etag, size: Int64(bytes.count)) == nil)
    #expect(files.inventory().etags == [etag])
    #expect(files.inventory().temporaries.isEmpty)

    // The same content again: the temporary goes, the one file stays.
    #expect(try Self.install(bytes, in: files) == etag)
    #expect(files.inventory().etags == [etag] && files.inventory().temporaries.isEmpty)

    let descriptor = open(files.path(etag: etag), O_RDONLY)
    defer { close(descriptor) }
    let read = try PictureFiles.read(descriptor: descriptor, offset: 1_000, count: 5_000)
    #expect([UInt8](read) == Array(bytes[1_000 ..< 6_000]))

    // A row that claims another size, a damaged byte, a missing file: each named.
    #expect(files.problem(etag: etag, size: 12)?.contains("its row says 12") == true)
    let handle = try #require(FileHandle(forWritingAtPath: files.path(etag: etag)))
    try handle.seek(toOffset: 10)
    try handle.write(contentsOf: Data([bytes[10] ^ 0xFF]))
    try handle.close()
    #expect(files.problem(etag: etag, size: Int64(bytes.count))?.contains("damaged") == true)
    files.remove(etag: etag)
    #expect(files.problem(etag: etag, size: Int64(bytes.count))?.contains("no file") == true)
    #expect(files.inventory().etags.isEmpty)
  }

  @Test(
    "only lowercase 64-digit hex names are etags",
    arguments: [
      (String(repeating: "a", count: 64), true), (String(repeating: "0", count: 64), true),
      (String(repeating: "A", count: 64), false), (String(repeating: "a", count: 63), false),
      (String(repeating: "a", count: 65), false), (String(repeating: "g", count: 64), false),
      ("../" + String(repeating: "a", count: 61), false), ("", false),
    ]
  )
  func etagNames(name: String, isEtag: Bool) {
    #expect(PictureFiles.isEtag(name) == isEtag)
  }
}
