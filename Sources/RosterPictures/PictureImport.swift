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

  /// Stores each file as its employee's picture, `concurrency` at a time (thumbnails are the
  /// cost), for `roster import` and demo seeding. A missing or bad file is reported with its
  /// reason and skips only that picture.
  ///
  /// A file named by several employees (the demo data's pool) goes through the upload
  /// pipeline once; the others then refer to the content it stored (`attachPictures`), a
  /// thousand to a write.
  ///
  /// - Returns: how many were stored, and each refusal as (guid, reason).
  public func importPictures(
    _ pictures: [(guid: String, path: String)],
    concurrency: Int = 2,
    context: WriteContext = WriteContext(author: "import")
  ) async throws -> (stored: Int, rejected: [(guid: String, reason: String)]) {
    var firsts: [(guid: String, path: String)] = []
    var sharing: [String: [String]] = [:]
    for picture in pictures {
      if sharing[picture.path] == nil {
        sharing[picture.path] = []
        firsts.append(picture)
      } else {
        sharing[picture.path]?.append(picture.guid)
      }
    }
    var stored = 0
    var rejected: [(guid: String, reason: String)] = []
    var outcomes: [String: Result<String, StoreError>] = [:]
    try await withThrowingTaskGroup(of: (String, String, Result<String, StoreError>).self) {
      group in
      var next = firsts.makeIterator()
      func add() -> Bool {
        guard let (guid, path) = next.next() else { return false }
        group.addTask {
          do {
            return (
              guid, path,
              .success(
                try await self.putPicture(guid: guid, file: path, context: context).info.etag
              )
            )
          } catch let error as StoreError {
            return (guid, path, .failure(error))
          }
        }
        return true
      }
      for _ in 0 ..< max(1, concurrency) { _ = add() }
      while let (guid, path, outcome) = try await group.next() {
        outcomes[path] = outcome
        switch outcome {
        case .success: stored += 1
        case .failure(let error): rejected.append((guid, error.message))
        }
        _ = add()
      }
    }
    for (path, guids) in sharing where !guids.isEmpty {
      let etag: String
      switch outcomes[path] {
      case .success(let stored)?: etag = stored
      case .failure(let error)?:
        rejected += guids.map { ($0, error.message) }
        continue
      case nil: continue
      }
      for start in stride(from: 0, to: guids.count, by: 1_000) {
        let batch = guids[start ..< min(start + 1_000, guids.count)]
        do {
          let attached = try await self.attachPictures(
            batch.map { (guid: $0, etag: etag) },
            context: context
          )
          stored += attached.count
          // Content deleted meanwhile: those employees' pictures go through the pipeline.
          for guid in batch where !attached.contains(guid) {
            do {
              try await self.putPicture(guid: guid, file: path, context: context)
              stored += 1
            } catch let error as StoreError {
              rejected.append((guid, error.message))
            }
          }
        } catch let error as StoreError where error.code == .notFound {
          // An employee the import refused: each one on its own, so only it is refused.
          for guid in batch {
            do {
              stored += try await self.attachPictures([(guid: guid, etag: etag)], context: context)
                .count
            } catch let error as StoreError {
              rejected.append((guid, error.message))
            }
          }
        }
      }
    }
    return (stored, rejected)
  }
}
