public import GRPCCore
internal import GRPCProtobuf
internal import RosterDomain
public import RosterProto
internal import RosterStore
public import Synchronization

/// `StreamEmployees` with its pages written straight from the rows the store reads, as the fast
/// path writes `ListEmployees` pages: by `EmployeeWire` in the binary form (gRPC, gRPC-Web,
/// Connect's `connect+proto`) or by `EmployeeJSON` (Connect's `connect+json`), as the call's
/// `CallWire` says; no `Roster_V1_Employee` per row, each page sized once and written once.
///
/// The generated registration serializes `Roster_V1_EmployeePage` messages, so this registers
/// the method again with a serializer of Roster's own; `GRPCServer` registers its services in
/// order and a later registration of a method replaces an earlier one, so it goes after
/// `DirectoryService`:
///
/// ```swift
/// let services: [any RegistrableRPCService] = [directory, directory.pageStreams, ...]
/// ```
public struct DirectoryPageStreams: RegistrableRPCService {
  let directory: DirectoryService

  /// Pages written in their binary form so far, over all streams (for tests: the registration
  /// took).
  public static let pagesWritten = Atomic<Int>(0)

  public func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
    self.register(with: &router, deserializer: ProtobufDeserializer())
  }

  /// Registers the method with `deserializer` for its request: protobuf's, or one that reads
  /// the call's messages in the form its `CallWire` says.
  public func register<Transport: ServerTransport>(
    with router: inout RPCRouter<Transport>,
    deserializer: some MessageDeserializer<Roster_V1_ListEmployeesRequest>
  ) {
    let directory = self.directory
    router.registerHandler(
      forMethod: Roster_V1_Directory.Method.StreamEmployees.descriptor,
      deserializer: deserializer,
      serializer: DirectReplySerializer<EmployeePageReply<Roster_V1_EmployeePage>>(),
      handler: { request, context in
        // As the generated glue: exactly one request message, then the pages.
        let request = try await ServerRequest(stream: request)
        let format = CallWire.current.format
        return StreamingServerResponse(metadata: [:]) { writer in
          try await directory.streamPages(request.message, written: format) {
            try await writer.write(contentsOf: $0)
          }
          return [:]
        }
      }
    )
  }
}

extension DirectoryService {
  /// `StreamEmployees` with pages written from the store's rows; list it after this service.
  public var pageStreams: DirectoryPageStreams { DirectoryPageStreams(directory: self) }

  /// Every employee the request matches, a page a message, handed to `write` as read: the
  /// pages of one read together, so they cross to the event loop in one hop. `written` as for
  /// `listEmployeesPage`: the rows written in that form as they are read.
  ///
  /// No read transaction is held between pages, so a slow reader never pins the WAL.
  /// Statuses: as `ListEmployees`, plus `CANCELLED` when the client goes away.
  func streamPages(
    _ request: Roster_V1_ListEmployeesRequest,
    written: WrittenFormat?,
    write: ([EmployeePageReply<Roster_V1_EmployeePage>]) async throws -> Void
  ) async throws {
    let listing = try DirectoryRequests.listing(request)
    try await withStatusMapping("StreamEmployees", logger: self.logger) {
      // The store reads the next pages while these are encoded and sent: the read runs on the
      // store's reader thread and the encoding here, so a stream keeps both busy. One read at
      // a time per stream, of several pages (`pagesPerRead`), each still a message of its own.
      let count = Self.pagesPerRead(listing.pageSize)
      var pages: PageReplies<Roster_V1_EmployeePage> = try await self.pageReplies(
        listing,
        after: listing.cursor,
        count: count,
        written: written
      )
      // Only the last page of a read can be empty: the listing ended there.
      pages.replies.removeAll { $0.rowCount == 0 }
      while !pages.replies.isEmpty {
        try Task.checkCancellation()
        let next = pages.next
        async let ahead: PageReplies<Roster_V1_EmployeePage> =
          next == nil
          ? PageReplies(replies: [], next: nil)
          : self.pageReplies(listing, after: next, count: count, written: written)
        Self.streamedRows.increment(by: pages.replies.reduce(0) { $0 + $1.rowCount })
        try await write(pages.replies)
        pages = try await ahead
        pages.replies.removeAll { $0.rowCount == 0 }
      }
    }
  }
}

extension DirectoryService {
  /// About this many rows a stream reads at once, in whole pages: one read of 4 pages of 50
  /// rather than 4 reads (docs/performance.md, "What each part saved").
  static let streamRowsPerRead = 200

  /// Pages of `pageSize` a stream reads at once: at least one.
  static func pagesPerRead(_ pageSize: Int) -> Int {
    max(1, Self.streamRowsPerRead / pageSize)
  }

  /// The replies of one read of pages, and where the pages after them start (nil when the
  /// listing ended).
  struct PageReplies<Message: EmployeePageMessage> {
    var replies: [EmployeePageReply<Message>]
    var next: EmployeeCursor?
  }

  /// Up to `count` pages of the listing after `cursor` (its start for nil), from one read, as
  /// replies: of the employees read, or, when `written`, of the rows in that form as the store
  /// read them (`EmployeeWire.Rows`, `EmployeeJSON.Rows`).
  func pageReplies<Message: EmployeePageMessage>(
    _ listing: DirectoryRequests.Listing,
    after cursor: EmployeeCursor?,
    count: Int,
    written: WrittenFormat?
  ) async throws -> PageReplies<Message> {
    let mask = listing.mask
    if let format = written {
      func read(_ writer: some EmployeeRowWriter) async throws -> [WrittenEmployeePage] {
        try await self.store.writtenEmployeePages(
          fields: mask.readFields,
          filter: listing.filter,
          order: listing.order,
          after: cursor,
          limit: listing.pageSize,
          count: count,
          writer: writer
        )
      }
      let pages =
        switch format {
        case .binary: try await read(EmployeeWire.Rows(mask: mask))
        case .json: try await read(EmployeeJSON.Rows(mask: mask))
        }
      return PageReplies(
        replies: pages.map {
          EmployeePageReply(
            written: $0,
            format: format,
            mask: mask,
            nextPageToken: listing.token(after: $0.next)
          )
        },
        next: pages.last?.next
      )
    }
    let pages = try await self.store.employeePages(
      fields: mask.readFields,
      filter: listing.filter,
      order: listing.order,
      after: cursor,
      limit: listing.pageSize,
      count: count
    )
    return PageReplies(
      replies: pages.map {
        EmployeePageReply(
          employees: $0.employees,
          mask: mask,
          nextPageToken: listing.token(after: $0.next)
        )
      },
      next: pages.last?.next
    )
  }
}

/// Writes a `DirectReply` in the call's form (`CallWire`); debug builds (every test) check each
/// binary one against SwiftProtobuf's bytes for its message (and `json()` checks its own).
struct DirectReplySerializer<Reply: DirectReply>: MessageSerializer {
  func serialize<Bytes: GRPCContiguousBytes>(_ reply: Reply) throws -> Bytes {
    guard CallWire.current.format == .binary else { return Bytes(reply.json()) }
    let bytes = reply.binary()
    DirectoryPageStreams.pagesWritten.add(1, ordering: .relaxed)
    assert(
      bytes == (try? reply.message.serializedBytes() as [UInt8]),
      "EmployeeWire differs from SwiftProtobuf"
    )
    return Bytes(bytes)
  }
}
