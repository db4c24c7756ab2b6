public import RosterDomain
internal import Foundation

extension SQLiteStore {
  /// Stores each file as its employee's picture, two at a time, for `roster import` and demo
  /// seeding. A missing or bad file is reported with its reason and skips only that picture.
  ///
  /// - Returns: how many were stored, and each refusal as (guid, reason).
  public func importPictures(
    _ pictures: [(guid: String, path: String)],
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
      for _ in 0..<max(1, self.configuration.pictures.thumbnailConcurrency) { _ = add() }
      while let (guid, failure) = try await group.next() {
        if let failure { rejected.append((guid, failure)) } else { stored += 1 }
        _ = add()
      }
    }
    return (stored, rejected)
  }
}
