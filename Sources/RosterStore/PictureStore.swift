public import Foundation
public import RosterDomain

/// Reads a stored picture's bytes, for `PictureStore.withPicture`.
public protocol PictureReading: Sendable {
  /// Up to `count` bytes from `offset`; fewer only at the end.
  func read(offset: Int64, count: Int) async throws -> Data
}

/// One upload in progress: chunks in, then `finish` (or `abandon`, which leaves nothing).
public protocol PictureUploading: AnyObject {
  /// Bytes received so far.
  var size: Int64 { get }
  /// Adds a chunk. Throws `resourceExhausted` the moment the picture crosses the size limit.
  func append(_ chunk: Data) async throws
  /// Checks, thumbnails and stores the picture, then points the employee at it.
  func finish(context: WriteContext) async throws -> StoredPicture
  /// Drops what was received.
  func abandon()
}

/// Pictures and thumbnails, stored apart from employee rows.
public protocol PictureStore: Sendable {
  /// Starts an upload for `guid`. Throws `notFound` for an unknown employee.
  func beginPictureUpload(
    guid: String,
    contentType: String,
    totalSize: Int64
  ) async throws -> any PictureUploading

  /// Runs `body` with `guid`'s picture and a reader of its bytes, held open for the call.
  /// Throws `notFound` for an unknown employee or one with no picture.
  func withPicture<T: Sendable>(
    guid: String,
    _ body: (PictureInfo, any PictureReading) async throws -> T
  ) async throws -> T

  /// Points each employee at content the store already holds under the etag given, with
  /// that content's thumbnail, as an upload of the same bytes would, in one write: for
  /// `roster copy`, which sends each distinct picture's bytes once. Returns the guids it
  /// pointed (or found pointed already); the rest, whose content the store does not hold, are
  /// left as they were. Throws `notFound` for an unknown employee, changing nothing.
  func attachPictures(
    _ pictures: [(guid: String, etag: String)],
    context: WriteContext
  ) async throws -> Set<String>

  /// `guid`'s thumbnail. Throws `notFound` for an unknown employee or one with no picture.
  func thumbnail(guid: String) async throws -> StoredThumbnail

  /// Removes `guid`'s picture and thumbnail. Throws `notFound` when there is none.
  func deletePicture(guid: String, context: WriteContext) async throws
}
