import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterDomain
import RosterProto
import RosterSQLite
import RosterSeed
import TestSupport
import Testing

/// Pictures stream through the real binary in constant memory, whatever their size.
@Suite("Picture memory, end to end", .timeLimit(.minutes(10)))
struct PictureMemoryTests {
  /// The bound the issue sets: a 200 MB picture may raise the server's RSS by 8 MB at most.
  static let allowance = 8 * 1024 * 1024

  @Test("a 200 MB picture goes up and comes back with the server's RSS within 8 MB")
  func largePictureInConstantMemory() async throws {
    // Noisy enough that JPEG cannot shrink it: about 200 MB of real, decodable picture.
    let big = try DemoPictures.jpeg(width: 14_000, height: 10_500, seed: 42, noise: 90, quality: 97)
    try #require(big.count >= 200_000_000, "the fixture is \(big.count) bytes")
    let warmUp = try DemoPictures.jpeg(width: 1600, height: 1200, seed: 1, noise: 30)

    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let server = try await RosterProcess.serve(
      arguments: [
        "--db", directory + "/memory.sqlite", "--seed-employees", "2", "--no-seed-pictures",
        "--max-picture-mb", "400",
      ]
    )
    defer { server.terminate() }

    try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: server.port),
        transportSecurity: .plaintext
      )
    ) { client in
      let pictures = Roster_V1_Pictures.Client(wrapping: client)
      let guids = try await Roster_V1_Directory.Client(wrapping: client)
        .listEmployees(.init()).employees.map(\.guid)
      try #require(guids.count == 2)

      // Warm up every path once (libvips, the transport, the writer), then measure.
      _ = try await Self.put(pictures, guid: guids[0], warmUp)
      #expect(try await Self.download(pictures, guid: guids[0], expecting: warmUp))
      try await Task.sleep(for: .milliseconds(200))
      try server.resetPeakMemory()
      let before = try server.memory().resident

      let put = try await Self.put(pictures, guid: guids[1], big)
      #expect(put.size == Int64(big.count))
      #expect(put.width == 14_000 && put.height == 10_500)
      let afterUpload = try server.memory().peak
      try server.resetPeakMemory()
      let beforeDownload = try server.memory().resident
      #expect(try await Self.download(pictures, guid: guids[1], expecting: big))

      let afterDownload = try server.memory().peak
      print(
        "picture memory: upload raised RSS by \((afterUpload - before) / 1024) KiB, "
          + "download by \((afterDownload - beforeDownload) / 1024) KiB"
      )
      // Before `GetPicture` paced itself on the transport (`ResponsePacing`), the download
      // raised it by 20 to 40 MB here: the handler read the file faster than the event loop
      // sent it, and every message waited on the loop's task queue.
      #expect(afterUpload - before <= Self.allowance, "upload")
      #expect(afterDownload - beforeDownload <= Self.allowance, "download")
    }
  }

  /// libvips and the hundred libraries it pulls in held 15 MiB of every server's RSS while it
  /// was linked; it is opened when the first thumbnail is made.
  @Test("the server maps libvips only once it makes a thumbnail")
  func libvipsOnFirstUse() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let server = try await RosterProcess.serve(
      arguments: [
        "--db", directory + "/lazy.sqlite", "--seed-employees", "1", "--no-seed-pictures",
      ]
    )
    defer { server.terminate() }
    func mapsLibvips() throws -> Bool { try server.procFile("maps").contains("libvips") }
    try await withGRPCClient(
      transport: .http2NIOPosix(
        target: .ipv4(address: "127.0.0.1", port: server.port),
        transportSecurity: .plaintext
      )
    ) { client in
      let guid = try #require(
        try await Roster_V1_Directory.Client(wrapping: client).listEmployees(.init()).employees
          .first?.guid
      )
      #expect(try !mapsLibvips(), "libvips is mapped before any thumbnail")
      let picture = try DemoPictures.jpeg(width: 320, height: 240, seed: 7, noise: 10)
      let put = try await Self.put(Roster_V1_Pictures.Client(wrapping: client), guid: guid, picture)
      #expect(put.width == 320 && put.height == 240)
      #expect(try mapsLibvips(), "the thumbnail came from libvips")
    }
  }

  static func put(
    _ pictures: Roster_V1_Pictures.Client<HTTP2ClientTransport.Posix>,
    guid: String,
    _ bytes: [UInt8]
  ) async throws -> Roster_V1_PutPictureResponse {
    try await pictures.putPicture { writer in
      try await writer.write(
        .with {
          $0.header = .with {
            $0.guid = guid
            $0.totalSize = Int64(bytes.count)
          }
        }
      )
      var start = 0
      while start < bytes.count {
        let end = min(bytes.count, start + 65_536)
        try await writer.write(.with { $0.chunk = Data(bytes[start ..< end]) })
        start = end
      }
    }
  }

  /// Downloads a picture and compares it with `expected` chunk by chunk, holding none of it.
  static func download(
    _ pictures: Roster_V1_Pictures.Client<HTTP2ClientTransport.Posix>,
    guid: String,
    expecting expected: [UInt8]
  ) async throws -> Bool {
    try await pictures.getPicture(.with { $0.guid = guid }) { response in
      var offset = 0
      for try await message in response.messages {
        guard message.offset == Int64(offset),
          message.data.elementsEqual(
            expected[offset ..< min(expected.count, offset + message.data.count)]
          )
        else { return false }
        offset += message.data.count
      }
      return offset == expected.count
    }
  }
}
