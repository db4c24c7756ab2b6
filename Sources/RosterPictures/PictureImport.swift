internal import Foundation
public import RosterDomain
public import RosterStore

extension PictureStore {
  /// Stores the picture file at `path` as `guid`'s picture, through the same path as an
  /// upload: `roster import` and demo seeding.
  @discardableResult
  public func putPicture(
    guid: String,
    file path: String,
    context: WriteContext = WriteContext()
  ) async throws -> StoredPicture {
    let upload = try await self.beginPictureUpload(guid: guid, contentType: "", totalSize: 0)
    guard let handle = FileHandle(forReadingAtPath: path) else {
      upload.abandon()
      throw StoreError(.invalidArgument, "picture file '\(path)' cannot be read")
    }
    defer { try? handle.close() }
    while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
      try await upload.append(chunk)
    }
    return try await upload.finish(context: context)
  }

  /// Stores each file as its employee's picture as the batches arrive, `concurrency` at a
  /// time (thumbnails are the cost), for `roster import` and demo seeding. A missing or bad
  /// file is reported with its reason and skips only that picture.
  ///
  /// A file named by several employees (the demo data's pool) goes through the upload
  /// pipeline once; the others then refer to the content it stored (`attachPictures`), a
  /// batch to a write. Memory holds one batch and the content of the last
  /// `rememberedFiles` files stored, whatever the input's length (a file forgotten and met
  /// again is sent again, and the pipeline finds its bytes already stored).
  public func importPictures<Files: AsyncSequence>(
    _ files: Files,
    concurrency: Int = 2,
    context: WriteContext = WriteContext(author: "import")
  ) async throws -> PictureImportSummary where Files.Element == [PictureFile] {
    var summary = PictureImportSummary()
    var remembered: [String: String] = [:]
    for try await batch in files {
      if remembered.count >= PictureImportSummary.rememberedFiles { remembered.removeAll() }
      // The first employee of each file not stored yet has it sent; the others refer to it.
      var firsts: [PictureFile] = []
      var sharing: [String: [String]] = [:]
      for file in batch {
        if remembered[file.path] != nil || sharing[file.path] != nil {
          sharing[file.path, default: []].append(file.guid)
        } else {
          sharing[file.path] = []
          firsts.append(file)
        }
      }
      let failed = try await self.send(firsts, concurrency: concurrency, context: context) {
        path,
        etag in
        remembered[path] = etag
        summary.stored += 1
      }
      for (file, error) in failed { summary.refuse(file.guid, error.message) }
      let refused = Dictionary(failed.map { ($0.0.path, $0.1) }, uniquingKeysWith: { a, _ in a })
      var referring: [(guid: String, etag: String, path: String)] = []
      for (path, guids) in sharing where !guids.isEmpty {
        if let error = refused[path] {
          for guid in guids { summary.refuse(guid, error.message) }
        } else if let etag = remembered[path] {
          referring += guids.map { (guid: $0, etag: etag, path: path) }
        }
      }
      try await self.refer(referring, context: context, into: &summary)
    }
    return summary
  }

  /// Sends each file through the upload pipeline, `concurrency` at a time; `stored` is told
  /// each one stored, and the refused ones are returned with why.
  private func send(
    _ files: [PictureFile],
    concurrency: Int,
    context: WriteContext,
    stored: (_ path: String, _ etag: String) -> Void
  ) async throws -> [(PictureFile, StoreError)] {
    var failed: [(PictureFile, StoreError)] = []
    try await withThrowingTaskGroup(of: (PictureFile, Result<String, StoreError>).self) { group in
      var next = files.makeIterator()
      func add() -> Bool {
        guard let file = next.next() else { return false }
        group.addTask {
          do {
            let etag = try await self.putPicture(guid: file.guid, file: file.path, context: context)
              .info.etag
            return (file, .success(etag))
          } catch let error as StoreError {
            return (file, .failure(error))
          }
        }
        return true
      }
      for _ in 0 ..< max(1, concurrency) { _ = add() }
      while let (file, outcome) = try await group.next() {
        switch outcome {
        case .success(let etag): stored(file.path, etag)
        case .failure(let error): failed.append((file, error))
        }
        _ = add()
      }
    }
    return failed
  }

  /// Points each employee's picture at content already stored (its `etag`, from the file at
  /// its `path`), a thousand to a write.
  private func refer(
    _ pictures: [(guid: String, etag: String, path: String)],
    context: WriteContext,
    into summary: inout PictureImportSummary
  ) async throws {
    for start in stride(from: 0, to: pictures.count, by: 1_000) {
      let batch = pictures[start ..< min(start + 1_000, pictures.count)]
      do {
        let attached = try await self.attachPictures(
          batch.map { (guid: $0.guid, etag: $0.etag) },
          context: context
        )
        summary.stored += attached.count
        // Content deleted meanwhile: those employees' pictures go through the pipeline.
        for picture in batch where !attached.contains(picture.guid) {
          do {
            try await self.putPicture(guid: picture.guid, file: picture.path, context: context)
            summary.stored += 1
          } catch let error as StoreError {
            summary.refuse(picture.guid, error.message)
          }
        }
      } catch let error as StoreError where error.code == .notFound {
        // An employee the import refused: each one on its own, so only it is refused.
        for picture in batch {
          do {
            summary.stored += try await self.attachPictures(
              [(guid: picture.guid, etag: picture.etag)],
              context: context
            ).count
          } catch let error as StoreError {
            summary.refuse(picture.guid, error.message)
          }
        }
      }
    }
  }
}

/// What `importPictures` did.
public struct PictureImportSummary: Sendable {
  /// Pictures stored, sent or referring to content already stored.
  public var stored = 0
  /// The first `ImportSummary.listedRejections` refusals, as (guid, reason).
  public var refused: [(guid: String, reason: String)] = []
  /// Every refusal, listed or not.
  public var refusedCount = 0

  /// How many files' stored content an import remembers, to point the next employees that
  /// name them at it.
  public static let rememberedFiles = 10_000

  public init() {}

  mutating func refuse(_ guid: String, _ reason: String) {
    self.refusedCount += 1
    if self.refused.count < ImportSummary.listedRejections {
      self.refused.append((guid, reason))
    }
  }
}
