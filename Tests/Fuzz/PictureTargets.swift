import Dispatch
import Foundation
import GRPCCore
import Logging
import RosterDomain
import RosterProto
import RosterSQLite
import RosterSeed
import RosterServices
import RosterStore

/// `PutPicture`'s message sequence: headers and chunks in any order and number, with any
/// guid, content type and declared size, chunks cut from a real JPEG or made of any bytes, and
/// a client that may go away before the end. Runs the real service over a real SQLite store
/// (one employee, small limits so the input's few KB cross them) and libvips.
enum PictureTargets {
  /// What must hold: the call succeeds, or fails with a status a client can act on
  /// (`INVALID_ARGUMENT`, `NOT_FOUND`, `RESOURCE_EXHAUSTED`, `CANCELLED`) whose message is
  /// bounded; a failed call leaves the stored picture as it was and no file behind; a
  /// successful one stores exactly the bytes sent.
  static func putPicture(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let (messages, clientLeaves) = Self.messages(&input)
    let fixture = Fixture.shared
    let before = fixture.state()
    let outcome = fixture.blocking {
      try await fixture.service.putPicture(
        request: RPCAsyncSequence(
          wrapping: AsyncThrowingStream { continuation in
            for message in messages { continuation.yield(message) }
            continuation.finish(
              throwing: clientLeaves ? RPCError(code: .cancelled, message: "gone") : nil
            )
          }
        ),
        context: ServerContext(
          descriptor: Roster_V1_Pictures.Method.PutPicture.descriptor,
          remotePeer: "fuzz",
          localPeer: "fuzz",
          cancellation: ServerContext.RPCCancellationHandle()
        )
      )
    }
    switch outcome {
    case .success:
      require(!clientLeaves, "an upload whose client went away was stored")
      let sent = messages.reduce(into: [UInt8]()) { sent, message in
        if case .chunk(let chunk) = message.part { sent += chunk }
      }
      require(fixture.state().bytes == sent, "the stored picture is not the bytes sent")
    case .failure(let error as RPCError):
      let allowed: [RPCError.Code] = [.invalidArgument, .notFound, .resourceExhausted, .cancelled]
      require(allowed.contains(error.code), "PutPicture failed with \(error)")
      require(
        error.message.utf8.count <= 512,
        "a status message of \(error.message.utf8.count) bytes"
      )
      require(fixture.state() == before, "a failed upload changed what is stored: \(error)")
    case .failure(let error):
      require(false, "PutPicture threw \(error), not a status")
    }
  }

  /// The messages the input describes, and whether the client leaves after them.
  private static func messages(_ input: inout FuzzInput) -> ([Roster_V1_PutPictureRequest], Bool) {
    let jpeg = Fixture.shared.jpeg
    let clientLeaves = input.choice(4) == 0
    var messages: [Roster_V1_PutPictureRequest] = []
    while !input.isEmpty && messages.count < 64 {
      var message = Roster_V1_PutPictureRequest()
      switch input.choice(6) {
      case 0:
        var header = Roster_V1_PictureHeader()
        header.guid = [Fixture.owner, Fixture.nobody, ""][input.choice(3)]
        header.contentType =
          ["", "image/jpeg", "image/png", "image/gif", "IMAGE/JPEG"][input.choice(5)]
        switch input.choice(4) {
        case 0: header.totalSize = 0
        case 1: header.totalSize = Int64(jpeg.count)
        case 2: header.totalSize = -1
        default: header.totalSize = Int64(input.byte()) << (input.byte() % 64)
        }
        message.header = header
      case 1:
        message.header = .with {
          $0.guid = String(decoding: input.field(until: 0), as: UTF8.self)
          $0.contentType = String(decoding: input.field(until: 0), as: UTF8.self)
          $0.totalSize = Int64(bitPattern: UInt64(input.byte()) << 56 | UInt64(input.byte()))
        }
      case 2, 3:
        // A piece of the real picture, from where the input says.
        let start = min(jpeg.count, Int(input.byte()) * 8)
        let count = Int(input.byte()) * 8 + 1
        message.chunk = Data(jpeg[start ..< min(jpeg.count, start + count)])
      case 4:
        message.chunk = Data(jpeg)
      default:
        message.chunk = Data(input.piece(most: 512))
      }
      if input.choice(16) == 0 { message = Roster_V1_PutPictureRequest() }
      messages.append(message)
    }
    return (messages, clientLeaves)
  }
}

/// The store, service and picture the target runs against, made once per process.
private final class Fixture: @unchecked Sendable {
  static let owner = "fa220000-0000-4000-8000-000000000001"
  static let nobody = "fa220000-0000-4000-8000-000000000002"
  static let shared = Fixture()

  let store: SQLiteStore
  let service: PicturesService
  let directory: String
  let jpeg: [UInt8]

  private init() {
    do {
      self.directory =
        FileManager.default.temporaryDirectory
        .appendingPathComponent("roster-fuzz-pictures-\(getpid())").path
      try FileManager.default.createDirectory(
        atPath: self.directory,
        withIntermediateDirectories: true
      )
      var configuration = StoreConfiguration(path: self.directory + "/fuzz.sqlite")
      configuration.pictures.inlineMaximumBytes = 1024
      configuration.pictures.maximumBytes = 3_000
      configuration.pictures.directory = self.directory + "/pictures"
      // Quiet: every refused picture would log a line.
      self.store = try SQLiteStore(
        configuration: configuration,
        logger: Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
      )
      self.jpeg = try DemoPictures.jpeg(width: 24, height: 16, seed: 7, noise: 10, quality: 60)
      require(self.jpeg.count <= 1_000, "the fuzz picture is \(self.jpeg.count) bytes")
    } catch {
      FuzzTarget.exit("could not set up the picture store: \(error)")
    }
    self.service = PicturesService(store: self.store)
    let store = self.store
    let made = self.blocking {
      var owner = Employee()
      (owner.guid, owner.name, owner.department) = (Self.owner, "Fuzzed Picture", "Design")
      (owner.startDate, owner.email) = ("2020-01-15", "fuzz@example.com")
      return try await store.importEmployees([owner])
    }
    if case .failure(let error) = made { FuzzTarget.exit("could not add the employee: \(error)") }
    atexit { try? FileManager.default.removeItem(atPath: Fixture.shared.directory) }
  }

  /// The owner's stored picture and the files under the picture directory.
  struct State: Equatable {
    var bytes: [UInt8]?
    var files: [String]
  }

  func state() -> State {
    let store = self.store
    let read = self.blocking { () async throws -> [UInt8]? in
      do {
        return try await store.withPicture(guid: Self.owner) { info, reader in
          Array(try await reader.read(offset: 0, count: Int(info.size)))
        }
      } catch let error as StoreError where error.code == .notFound {
        return nil
      }
    }
    guard case .success(let bytes) = read else {
      FuzzTarget.exit("could not read the stored picture: \(read)")
    }
    let files = FileManager.default.subpaths(atPath: self.directory + "/pictures") ?? []
    return State(bytes: bytes, files: files.sorted())
  }

  /// `body`'s result, waited for on this thread (libFuzzer calls the target synchronously).
  func blocking<T: Sendable>(
    _ body: @escaping @Sendable () async throws -> T
  ) -> Result<T, any Error> {
    let done = DispatchSemaphore(value: 0)
    let result = ResultBox<T>()
    Task {
      do { result.value = .success(try await body()) } catch { result.value = .failure(error) }
      done.signal()
    }
    done.wait()
    return result.value!
  }
}

/// Carries a task's result to the thread that waits for it (the semaphore orders the two).
private final class ResultBox<T>: @unchecked Sendable {
  var value: Result<T, any Error>?
}
