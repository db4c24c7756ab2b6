public import GRPCCore
public import RosterProto

/// `roster.v1.Pictures`: full pictures and thumbnails, on demand and streamed.
///
/// Every method answers `UNIMPLEMENTED` until issue #4 builds it; the contract is
/// published now so clients can be generated against it.
public struct PicturesService: Sendable {
  /// Creates the service.
  public init() {}
}

extension PicturesService: Roster_V1_Pictures.SimpleServiceProtocol {
  /// Statuses: `UNIMPLEMENTED` until issue #4.
  public func putPicture(
    request: RPCAsyncSequence<Roster_V1_PutPictureRequest, any Error>,
    context: ServerContext
  ) async throws -> Roster_V1_PutPictureResponse {
    throw unimplemented("roster.v1.Pictures/PutPicture")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #4.
  public func getPicture(
    request: Roster_V1_GetPictureRequest,
    response: RPCWriter<Roster_V1_GetPictureResponse>,
    context: ServerContext
  ) async throws {
    throw unimplemented("roster.v1.Pictures/GetPicture")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #4.
  public func getThumbnail(
    request: Roster_V1_GetThumbnailRequest,
    context: ServerContext
  ) async throws -> Roster_V1_GetThumbnailResponse {
    throw unimplemented("roster.v1.Pictures/GetThumbnail")
  }

  /// Statuses: `UNIMPLEMENTED` until issue #4.
  public func deletePicture(
    request: Roster_V1_DeletePictureRequest,
    context: ServerContext
  ) async throws -> Roster_V1_DeletePictureResponse {
    throw unimplemented("roster.v1.Pictures/DeletePicture")
  }
}
