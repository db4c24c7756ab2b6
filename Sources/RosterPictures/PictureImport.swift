public import RosterDomain
public import RosterStore
internal import Foundation

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
  /// - Returns: how many were stored, and each refusal as (guid, reason).
  public func importPictures(
    _ pictures: [(guid: String, path: String)],
    concurrency: Int = 2,
    context: WriteContext = WriteContext(author: "import")
  ) async throws -> (stored: Int, rejected: [(guid: String, reason: String)]) {
    var stored = 0
    var rejected: [(guid: String, reason: String)] = []
    try await withThrowingTaskGroup(of: (String, String?).self) { group in
      var next = pictures.makeIterator()
      func add() -> Bool {
        guard let (guid, path) = next.next() else { return false }
        group.addTask {
          do {
            try await self.putPicture(guid: guid, file: path, context: context)
            return (guid, nil)
          } catch let error as StoreError {
            return (guid, error.message)
          }
        }
        return true
      }
      for _ in 0..<max(1, concurrency) { _ = add() }
      while let (guid, failure) = try await group.next() {
        if let failure { rejected.append((guid, failure)) } else { stored += 1 }
        _ = add()
      }
    }
    return (stored, rejected)
  }
}
