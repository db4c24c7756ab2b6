internal import Foundation
public import GRPCCore
public import Logging
internal import RosterDomain
public import RosterProto
public import RosterStore

/// `roster.v1.Pictures`: full pictures and thumbnails, on demand and streamed.
///
/// Pictures never travel with employee rows. Uploads and downloads stream in constant memory:
/// bytes go to and come from the store a chunk at a time.
public struct PicturesService: Sendable {
  private let store: any PictureStore & DirectoryStore
  private let logger: Logger
  private let pacing: any ResponsePacing
  /// The most bytes in one `GetPicture` message.
  public static let chunkSize = 64 * 1024
  /// How many `GetPicture` messages make one span: one read from the store, one write to the
  /// transport, then a wait until the transport has taken the span before.
  ///
  /// Eight: a read and a write per message was slower, and a span of 16 raised the server's
  /// RSS during a 200 MB download past `PictureMemoryTests`' bound (docs/performance.md).
  public static let messagesPerPacing = 8

  /// Creates the service over a shared store. `pacing` keeps `GetPicture` from reading ahead
  /// of the transport; the real server passes its event loops (`EventLoopPacing`).
  public init(
    store: any PictureStore & DirectoryStore,
    pacing: any ResponsePacing = UnpacedResponses(),
    logger: Logger = Logger(label: "roster.pictures")
  ) {
    self.store = store
    self.pacing = pacing
    self.logger = logger
  }
}

extension PicturesService: Roster_V1_Pictures.SimpleServiceProtocol {
  /// Stores a picture: a `header` message first, then `chunk` messages.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a missing or repeated header, a bad guid, bytes that
  /// are not a decodable JPEG or PNG, or a `content_type` or `total_size` that does not match;
  /// `NOT_FOUND` for an unknown employee; `RESOURCE_EXHAUSTED` the moment the picture crosses
  /// the size limit; `PERMISSION_DENIED` for another's picture from a caller let in for their
  /// own record only. A failed or cancelled upload leaves no file and no row.
  public func putPicture(
    request: RPCAsyncSequence<Roster_V1_PutPictureRequest, any Error>,
    context: ServerContext
  ) async throws -> Roster_V1_PutPictureResponse {
    try await withStatusMapping("PutPicture", logger: self.logger) {
      var upload: (any PictureUploading)? = nil
      defer { upload?.abandon() }
      for try await message in request {
        switch message.part {
        case .header(let header):
          guard upload == nil else {
            throw RPCError(code: .invalidArgument, message: "header was sent twice")
          }
          if header.totalSize < 0 {
            throw RPCError(code: .invalidArgument, message: "total_size must not be negative")
          }
          let guid = try DirectoryRequests.guid(header.guid)
          try await Caller.requireOwnRecord(guid: guid, field: "header.guid", store: self.store)
          upload = try await self.store.beginPictureUpload(
            guid: guid,
            contentType: header.contentType,
            totalSize: header.totalSize
          )
        case .chunk(let bytes):
          guard let upload else {
            throw RPCError(code: .invalidArgument, message: "header must come before any chunk")
          }
          try await upload.append(bytes)
        case nil:
          throw RPCError(code: .invalidArgument, message: "each message needs a header or a chunk")
        }
      }
      guard let upload else {
        throw RPCError(code: .invalidArgument, message: "header is required")
      }
      let stored = try await upload.finish(context: RequestAuthor.writeContext)
      return .with {
        $0.etag = stored.info.etag
        $0.size = stored.info.size
        $0.width = Int32(stored.info.width)
        $0.height = Int32(stored.info.height)
        $0.thumbnail = Data(stored.thumbnail.data)
      }
    }
  }

  /// Streams a picture in chunks of at most 64 KiB from `offset`. The first message carries
  /// the picture's size, etag, type and dimensions. When `if_none_match` is the current
  /// etag, the stream ends with no messages.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a bad guid or a negative offset, `NOT_FOUND` for an
  /// unknown employee or one with no picture, `OUT_OF_RANGE` for an offset past the end.
  public func getPicture(
    request: Roster_V1_GetPictureRequest,
    response: RPCWriter<Roster_V1_GetPictureResponse>,
    context: ServerContext
  ) async throws {
    let guid = try DirectoryRequests.guid(request.guid)
    if request.offset < 0 {
      throw RPCError(code: .invalidArgument, message: "offset must not be negative")
    }
    try await withStatusMapping("GetPicture", logger: self.logger) {
      try await self.store.withPicture(guid: guid) { info, reader in
        if !request.ifNoneMatch.isEmpty && request.ifNoneMatch == info.etag { return }
        if request.offset > info.size {
          throw RPCError(
            code: .outOfRange,
            message: "offset \(request.offset) is past the end of the \(info.size)-byte picture"
          )
        }
        // One read per span of `messagesPerPacing` messages, in one trip to the store's
        // reader, cut into messages that share its buffer and handed to the transport in one
        // write. After each span the handler waits until the transport has taken the span
        // before it, so at most two spans (1 MiB) are ever ahead of it.
        let spanSize = Self.chunkSize * Self.messagesPerPacing
        var offset = request.offset
        var first = true
        var taken: Task<Void, Never>? = nil
        defer { taken?.cancel() }
        repeat {
          let span = try await reader.read(offset: offset, count: spanSize)
          var messages: [Roster_V1_GetPictureResponse] = []
          messages.reserveCapacity(Self.messagesPerPacing)
          var start = span.startIndex
          repeat {
            let end = min(span.endIndex, start + Self.chunkSize)
            var message = Roster_V1_GetPictureResponse()
            message.data = span[start ..< end]
            message.offset = offset + Int64(start - span.startIndex)
            if first {
              message.totalSize = info.size
              message.etag = info.etag
              message.contentType = info.contentType
              message.width = Int32(info.width)
              message.height = Int32(info.height)
              first = false
            }
            messages.append(message)
            start = end
          } while start < span.endIndex
          try await response.write(contentsOf: messages)
          offset += Int64(span.count)
          // A short span is the end of the picture (an empty one only when nothing was left).
          if span.count < spanSize { break }
          await taken?.value
          taken = Task { await self.pacing.drained() }
        } while offset < info.size
      }
    }
  }

  /// An employee's thumbnail.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a bad guid, `NOT_FOUND` for an unknown employee or one
  /// with no picture.
  public func getThumbnail(
    request: Roster_V1_GetThumbnailRequest,
    context: ServerContext
  ) async throws -> Roster_V1_GetThumbnailResponse {
    let guid = try DirectoryRequests.guid(request.guid)
    return try await withStatusMapping("GetThumbnail", logger: self.logger) {
      let thumbnail = try await self.store.thumbnail(guid: guid)
      return .with {
        $0.data = Data(thumbnail.data)
        $0.etag = thumbnail.etag
        $0.width = Int32(thumbnail.width)
        $0.height = Int32(thumbnail.height)
      }
    }
  }

  /// Removes an employee's picture and thumbnail.
  ///
  /// Statuses: `INVALID_ARGUMENT` for a bad guid, `NOT_FOUND` for an unknown employee or one
  /// with no picture.
  public func deletePicture(
    request: Roster_V1_DeletePictureRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeletePictureResponse {
    let guid = try DirectoryRequests.guid(request.guid)
    return try await withStatusMapping("DeletePicture", logger: self.logger) {
      try await self.store.deletePicture(guid: guid, context: RequestAuthor.writeContext)
      return Roster_V1_DeletePictureResponse()
    }
  }
}
