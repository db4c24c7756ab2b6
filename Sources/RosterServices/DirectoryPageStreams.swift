public import GRPCCore
internal import GRPCProtobuf
public import RosterProto
internal import RosterDomain
public import Synchronization

/// `StreamEmployees` over gRPC with its pages written by `EmployeeWire`, straight from the
/// store's employees, as the fast path writes `ListEmployees` pages: no `Roster_V1_Employee`
/// per row, each page sized once and written once (docs/performance.md, "Streamed pages
/// written straight to protobuf").
///
/// The generated registration serializes `Roster_V1_EmployeePage` messages, so this registers
/// the method again with a serializer of Roster's own; `GRPCServer` registers its services in
/// order and a later registration of a method replaces an earlier one, so it goes after
/// `DirectoryService`:
///
/// ```swift
/// let services: [any RegistrableRPCService] = [directory, directory.pageStreams, ...]
/// ```
///
/// The Connect protocol's and gRPC-Web's streams keep `streamEmployees`, which writes messages
/// (their JSON needs them).
public struct DirectoryPageStreams: RegistrableRPCService {
  let directory: DirectoryService

  /// Pages written in their binary form so far, over all streams (for tests: the registration
  /// took).
  public static let pagesWritten = Atomic<Int>(0)

  public func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
    let directory = self.directory
    router.registerHandler(
      forMethod: Roster_V1_Directory.Method.StreamEmployees.descriptor,
      deserializer: ProtobufDeserializer<Roster_V1_ListEmployeesRequest>(),
      serializer: DirectReplySerializer<EmployeePageReply<Roster_V1_EmployeePage>>(),
      handler: { request, context in
        // As the generated glue: exactly one request message, then the pages.
        let request = try await ServerRequest(stream: request)
        return StreamingServerResponse(metadata: [:]) { writer in
          try await directory.streamPages(request.message) { try await writer.write(contentsOf: $0) }
          return [:]
        }
      }
    )
  }
}

extension DirectoryService {
  /// `StreamEmployees` over gRPC, with pages in `EmployeeWire`'s binary form; list it after
  /// this service.
  public var pageStreams: DirectoryPageStreams { DirectoryPageStreams(directory: self) }

  /// Every employee the request matches, a page a message, handed to `write` as read: the
  /// pages of one read together, so they cross to the event loop in one hop.
  ///
  /// No read transaction is held between pages, so a slow reader never pins the WAL.
  /// Statuses: as `ListEmployees`, plus `CANCELLED` when the client goes away.
  func streamPages(
    _ request: Roster_V1_ListEmployeesRequest,
    write: ([EmployeePageReply<Roster_V1_EmployeePage>]) async throws -> Void
  ) async throws {
    let listing = try DirectoryRequests.listing(request)
    try await withStatusMapping("StreamEmployees", logger: self.logger) {
      // The store reads the next pages while these are encoded and sent: the read runs on the
      // store's reader thread and the encoding here, so a stream keeps both busy. One read at
      // a time per stream, of several pages (`pagesPerRead`), each still a message of its own.
      let count = Self.pagesPerRead(listing.pageSize)
      var pages = try await self.readPages(listing, after: listing.cursor, count: count)
      while let first = pages.first, !first.employees.isEmpty {
        try Task.checkCancellation()
        let next = pages[pages.count - 1].next
        async let ahead = self.readPages(listing, following: next, count: count)
        let replies = pages.filter { !$0.employees.isEmpty }.map { page in
          EmployeePageReply<Roster_V1_EmployeePage>(
            employees: page.employees,
            mask: listing.mask,
            nextPageToken: listing.token(after: page.next)
          )
        }
        Self.streamedRows.increment(by: replies.reduce(0) { $0 + $1.employees.count })
        try await write(replies)
        pages = try await ahead
      }
    }
  }
}

extension DirectoryService {
  /// About this many rows a stream reads at once, in whole pages: one read of 4 pages of 50
  /// rather than 4 reads (docs/performance.md, "Streamed pages written straight to protobuf").
  static let streamRowsPerRead = 200

  /// Pages of `pageSize` a stream reads at once: at least one.
  static func pagesPerRead(_ pageSize: Int) -> Int {
    max(1, Self.streamRowsPerRead / pageSize)
  }

  /// The `count` pages after `cursor`, the end of a page; none when there is no cursor (the
  /// listing ended).
  func readPages(
    _ listing: DirectoryRequests.Listing,
    following cursor: EmployeeCursor?,
    count: Int
  ) async throws -> [EmployeePage] {
    guard let cursor else { return [] }
    return try await self.readPages(listing, after: cursor, count: count)
  }

  /// Up to `count` pages of the listing after `cursor` (its start for nil), from one read.
  func readPages(
    _ listing: DirectoryRequests.Listing,
    after cursor: EmployeeCursor?,
    count: Int
  ) async throws -> [EmployeePage] {
    try await self.store.employeePages(
      fields: listing.mask.fields,
      filter: listing.filter,
      order: listing.order,
      after: cursor,
      limit: listing.pageSize,
      count: count
    )
  }
}

/// Writes a `DirectReply` in its binary form; debug builds (every test) check each against
/// SwiftProtobuf's bytes for its message.
struct DirectReplySerializer<Reply: DirectReply>: MessageSerializer {
  func serialize<Bytes: GRPCContiguousBytes>(_ reply: Reply) throws -> Bytes {
    let bytes = reply.binary()
    DirectoryPageStreams.pagesWritten.add(1, ordering: .relaxed)
    assert(bytes == (try? reply.message.serializedBytes() as [UInt8]), "EmployeeWire differs from SwiftProtobuf")
    return Bytes(bytes)
  }
}
