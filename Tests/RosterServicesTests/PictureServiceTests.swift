import Foundation
import GRPCCore
import GRPCInProcessTransport
import PostgresNIO
import RosterDomain
import RosterPictures
import RosterPostgres
import RosterProto
import RosterSQLite
import RosterSeed
import RosterStore
import TestSupport
import Testing

/// The Pictures service through a real client: storage, streaming, thumbnails, bad input.
@Suite("Pictures", .timeLimit(.minutes(10)))
struct PictureServiceTests {
  typealias Pictures = Roster_V1_Pictures.Client<InProcessTransport.Client>
  typealias Directory = Roster_V1_Directory.Client<InProcessTransport.Client>

  static let alice = makeEmployee(
    name: "Alice Picture",
    guid: "a11ce000-0000-4000-8000-000000000001"
  )
  static let bob = makeEmployee(name: "Bob Picture", guid: "b0b00000-0000-4000-8000-000000000002")

  /// A large picture (stored as a file) and a small one (stored in the database).
  static let large = try! DemoPictures.jpeg(width: 1600, height: 1200, seed: 7, noise: 30)
  static let small = try! DemoPictures.jpeg(width: 300, height: 200, seed: 8, noise: 2)

  static func withPictures(
    on backend: TestBackend,
    configure: (inout PictureConfiguration) -> Void = { _ in },
    _ body: (Pictures, Directory, any StoreBackend) async throws -> Void
  ) async throws {
    try await withTemporaryStore(on: backend, extra: [Self.alice, Self.bob], pictures: configure) {
      store async throws in
      try await withInProcessClient(store: store) { client async throws in
        try await body(Pictures(wrapping: client), Directory(wrapping: client), store)
      }
    }
  }

  /// Uploads `bytes` for `guid` in 64 KiB chunks after a header.
  static func put(
    _ pictures: Pictures,
    guid: String,
    _ bytes: [UInt8],
    contentType: String = "image/jpeg",
    header: Bool = true,
    headerTwice: Bool = false
  ) async throws -> Roster_V1_PutPictureResponse {
    try await pictures.putPicture { writer in
      if header || headerTwice {
        try await writer.write(
          .with {
            $0.header = .with {
              $0.guid = guid
              $0.contentType = contentType
              $0.totalSize = Int64(bytes.count)
            }
          }
        )
      }
      if headerTwice { try await writer.write(.with { $0.header = .with { $0.guid = guid } }) }
      var start = 0
      while start < bytes.count {
        let end = min(bytes.count, start + 65_536)
        try await writer.write(.with { $0.chunk = Data(bytes[start ..< end]) })
        start = end
      }
    }
  }

  /// Every message of a GetPicture stream.
  static func get(
    _ pictures: Pictures,
    _ request: Roster_V1_GetPictureRequest
  ) async throws -> [Roster_V1_GetPictureResponse] {
    try await pictures.getPicture(request) { response in
      var messages: [Roster_V1_GetPictureResponse] = []
      for try await message in response.messages { messages.append(message) }
      return messages
    }
  }

  /// What holds full pictures: on SQLite, picture files and temporary files on disk; on
  /// PostgreSQL, picture rows and their chunks.
  static func stored(_ store: any StoreBackend) async throws -> [String] {
    if let store = store as? SQLiteStore { return Self.files(store) }
    let store = try #require(store as? PostgresStore)
    let rows = try await PostgresTesting.query(
      store.configuration,
      "SELECT 'picture ' || etag FROM pictures UNION ALL SELECT 'chunk ' || etag || ' ' || n FROM picture_chunks"
    )
    return try rows.map { try $0.decode(String.self) }
  }

  /// Picture files and temporary files on disk.
  static func files(_ store: SQLiteStore) -> [String] {
    let root = store.configuration.picturesDirectory
    let enumerator = FileManager.default.enumerator(atPath: root)
    var files: [String] = []
    while let path = enumerator?.nextObject() as? String {
      var isDirectory: ObjCBool = false
      FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory)
      if !isDirectory.boolValue { files.append(path) }
    }
    return files
  }

  @Test(
    "a large and a small picture round-trip byte for byte, with stable etags",
    arguments: TestBackend.available
  )
  func roundTrip(_ backend: TestBackend) async throws {
    try await Self.withPictures(on: backend) { pictures, directory, store async throws in
      for bytes in [Self.large, Self.small] {
        let put = try await Self.put(pictures, guid: Self.alice.guid, bytes)
        #expect(put.size == Int64(bytes.count))
        #expect(put.etag.count == 64)
        let messages = try await Self.get(pictures, .with { $0.guid = Self.alice.guid })
        #expect(messages.allSatisfy { $0.data.count <= 65_536 })
        #expect(Array(messages.map(\.data).joined()) == bytes)
        #expect(messages.first?.totalSize == Int64(bytes.count))
        #expect(messages.first?.etag == put.etag)
        #expect(messages.first?.contentType == "image/jpeg")
        #expect(messages.dropFirst().allSatisfy { $0.etag.isEmpty && $0.totalSize == 0 })
        let again = try await Self.put(pictures, guid: Self.bob.guid, bytes)
        #expect(again.etag == put.etag, "same bytes, same etag")
        let employee = try await directory.getEmployee(.with { $0.guid = Self.alice.guid })
        #expect(employee.hasPicture_p)
        #expect(employee.pictureEtag == put.etag)
      }
      if let store = store as? SQLiteStore {
        #expect(Self.large.count > store.configuration.pictures.inlineMaximumBytes)
        #expect(Self.small.count <= store.configuration.pictures.inlineMaximumBytes)
      }
    }
  }

  @Test(
    "resuming from an offset gives exactly the rest; dimensions are the picture's",
    arguments: TestBackend.available
  )
  func resume(_ backend: TestBackend) async throws {
    try await Self.withPictures(on: backend) { pictures, _, _ async throws in
      let put = try await Self.put(pictures, guid: Self.alice.guid, Self.large)
      #expect(put.width == 1600 && put.height == 1200)
      let offset = 100_001
      let messages = try await Self.get(
        pictures,
        .with {
          $0.guid = Self.alice.guid
          $0.offset = Int64(offset)
        }
      )
      #expect(messages.first?.offset == Int64(offset))
      #expect(messages.first?.width == 1600)
      #expect(Array(messages.map(\.data).joined()) == Array(Self.large[offset...]))
      var expected = Int64(offset)
      for message in messages {
        #expect(message.offset == expected)
        expected += Int64(message.data.count)
      }
      let atEnd = try await Self.get(
        pictures,
        .with {
          $0.guid = Self.alice.guid
          $0.offset = Int64(Self.large.count)
        }
      )
      #expect(atEnd.map(\.data.count) == [0], "at the very end: the header and no bytes")
    }
  }

  @Test(
    "if_none_match with the current etag sends nothing; a stale one sends it all",
    arguments: TestBackend.available
  )
  func ifNoneMatch(_ backend: TestBackend) async throws {
    try await Self.withPictures(on: backend) { pictures, _, _ async throws in
      let put = try await Self.put(pictures, guid: Self.alice.guid, Self.large)
      let unchanged = try await Self.get(
        pictures,
        .with {
          $0.guid = Self.alice.guid
          $0.ifNoneMatch = put.etag
        }
      )
      #expect(unchanged.isEmpty)
      let stale = try await Self.get(
        pictures,
        .with {
          $0.guid = Self.alice.guid
          $0.ifNoneMatch = String(repeating: "0", count: 64)
        }
      )
      #expect(Array(stale.map(\.data).joined()) == Self.large)
    }
  }

  @Test(
    "thumbnails are 120 px high JPEGs, inline with the employee, and follow the picture",
    arguments: TestBackend.available
  )
  func thumbnails(_ backend: TestBackend) async throws {
    try await Self.withPictures(on: backend) { pictures, directory, _ async throws in
      let put = try await Self.put(pictures, guid: Self.alice.guid, Self.large)
      #expect(put.thumbnail.starts(with: [0xFF, 0xD8, 0xFF]))
      let thumbnail = try await pictures.getThumbnail(.with { $0.guid = Self.alice.guid })
      #expect(thumbnail.height == 120)
      #expect(thumbnail.width == 160, "1600 x 1200 keeps its aspect ratio")
      #expect(thumbnail.etag == put.etag)
      #expect(thumbnail.data == put.thumbnail)
      let listed = try await directory.listEmployees(
        .with { $0.readMask = .with { $0.paths = ["guid", "thumbnail"] } }
      )
      let alice = listed.employees.first { $0.guid == Self.alice.guid }
      #expect(alice?.thumbnail == put.thumbnail, "list pages carry the thumbnail")
      try await pictures.deletePicture(.with { $0.guid = Self.alice.guid })
      await expectStatus(.notFound, mentioning: "no picture") {
        _ = try await pictures.getThumbnail(.with { $0.guid = Self.alice.guid })
      }
      let employee = try await directory.getEmployee(.with { $0.guid = Self.alice.guid })
      #expect(!employee.hasPicture_p)
      #expect(employee.pictureEtag.isEmpty)
    }
  }

  @Test(
    "identical pictures share one file, which goes with its last reference",
    arguments: TestBackend.available
  )
  func deduplication(_ backend: TestBackend) async throws {
    try await Self.withPictures(on: backend) { pictures, directory, store async throws in
      _ = try await Self.put(pictures, guid: Self.alice.guid, Self.large)
      _ = try await Self.put(pictures, guid: Self.bob.guid, Self.large)
      let shared = try await Self.stored(store)
      #expect(
        shared.filter { !$0.hasPrefix("chunk ") }.count == 1,
        "one picture for both: \(shared)"
      )
      _ = try await directory.deleteEmployee(.with { $0.guid = Self.alice.guid })
      #expect(try await Self.stored(store) == shared, "Bob still uses it")
      _ = try await directory.deleteEmployee(.with { $0.guid = Self.bob.guid })
      #expect(try await Self.stored(store).isEmpty)
    }
  }

  @Test("a replaced picture's file goes; the sweep removes strays")
  func replaceAndSweep() async throws {
    // Files and their sweep are SQLite's; PostgreSQL's picture rows go by trigger.
    try await Self.withPictures(on: .sqlite) { pictures, _, store async throws in
      let store = try #require(store as? SQLiteStore)
      _ = try await Self.put(pictures, guid: Self.alice.guid, Self.large)
      let other = try DemoPictures.jpeg(width: 1500, height: 1000, seed: 9, noise: 30)
      let put = try await Self.put(pictures, guid: Self.alice.guid, other)
      #expect(Self.files(store).map { String($0.suffix(64)) } == [put.etag])
      let stray = store.configuration.picturesDirectory + "/tmp/upload-left-by-a-crash"
      FileManager.default.createFile(atPath: stray, contents: Data([1, 2, 3]))
      #expect(try await store.sweepPictureFiles() == 1)
      #expect(Self.files(store).count == 1)
    }
  }

  @Test(
    "an upload the client abandons midway leaves no file and no row",
    arguments: TestBackend.available
  )
  func abandonedUpload(_ backend: TestBackend) async throws {
    struct GaveUp: Error {}
    try await Self.withPictures(on: backend) { pictures, directory, store async throws in
      await #expect(throws: (any Error).self) {
        _ = try await pictures.putPicture { writer in
          try await writer.write(.with { $0.header = .with { $0.guid = Self.alice.guid } })
          for start in stride(from: 0, to: 196_608, by: 65_536) {
            try await writer.write(.with { $0.chunk = Data(Self.large[start ..< start + 65_536]) })
          }
          throw GaveUp()
        }
      }
      // The server notices the cancelled stream on its own schedule.
      #expect(try await eventually { try await Self.stored(store).isEmpty })
      let employee = try await directory.getEmployee(.with { $0.guid = Self.alice.guid })
      #expect(!employee.hasPicture_p)
      #expect(store.latestChange == 2, "only the two imported employees were logged")
    }
  }

  @Test(
    "bad uploads and reads get a clear status, and leave no file and no row",
    arguments: TestBackend.available
  )
  func badInput(_ backend: TestBackend) async throws {
    let corrupt = Array(Self.large.prefix(Self.large.count / 2))
    try await Self.withPictures(on: backend, configure: { $0.maximumBytes = 150_000 }) {
      pictures,
      directory,
      store async throws in
      let guid = Self.alice.guid
      await expectStatus(.invalidArgument, mentioning: "not a JPEG or PNG") {
        _ = try await Self.put(pictures, guid: guid, Array("hello, world".utf8))
      }
      await expectStatus(.invalidArgument, mentioning: "decoded") {
        _ = try await Self.put(pictures, guid: guid, Array(corrupt.prefix(120_000)))
      }
      await expectStatus(.resourceExhausted, mentioning: "limit") {
        _ = try await Self.put(pictures, guid: guid, Self.large)
      }
      await expectStatus(.invalidArgument, mentioning: "header") {
        _ = try await Self.put(pictures, guid: guid, Self.small, header: false)
      }
      await expectStatus(.invalidArgument, mentioning: "header") {
        _ = try await Self.put(pictures, guid: guid, Self.small, headerTwice: true)
      }
      await expectStatus(.invalidArgument, mentioning: "content_type") {
        _ = try await Self.put(pictures, guid: guid, Self.small, contentType: "image/png")
      }
      await expectStatus(.invalidArgument, mentioning: "guid") {
        _ = try await Self.put(pictures, guid: "not-a-guid", Self.small)
      }
      await expectStatus(.notFound, mentioning: "no employee") {
        _ = try await Self.put(pictures, guid: "00000000-0000-4000-8000-00000000dead", Self.small)
      }
      await expectStatus(.notFound, mentioning: "no picture") {
        _ = try await Self.get(pictures, .with { $0.guid = guid })
      }
      #expect(try await Self.stored(store).isEmpty)
      let employee = try await directory.getEmployee(.with { $0.guid = guid })
      #expect(!employee.hasPicture_p)
      #expect(store.latestChange == 2, "only the two imported employees were logged")

      _ = try await Self.put(pictures, guid: guid, Self.small)
      await expectStatus(.outOfRange, mentioning: "past the end") {
        _ = try await Self.get(
          pictures,
          .with {
            $0.guid = guid
            $0.offset = Int64(Self.small.count + 1)
          }
        )
      }
      await expectStatus(.invalidArgument, mentioning: "offset") {
        _ = try await Self.get(
          pictures,
          .with {
            $0.guid = guid
            $0.offset = -1
          }
        )
      }
    }
  }
}
