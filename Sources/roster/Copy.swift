import ArgumentParser
import Foundation
import RosterDomain
import RosterPostgres
import RosterSQLite
import RosterSeed
import RosterStore

/// `roster copy`: moves a directory between backends (`DirectoryCopy`), SQLite to PostgreSQL
/// and back, then checks the target against the source.
struct Copy: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract:
      "Copy every employee, picture and sale from one database to another (SQLite and PostgreSQL, either way), then verify.",
    discussion: """
      Each side is sqlite:PATH (its pictures in PATH-pictures) or a postgres:// URL. The source \
      must not change meanwhile: copy from a stopped server or from a roster backup. An \
      interrupted copy goes on from where it stopped with --resume.
      """
  )

  @Option(
    help: "Where to copy from: sqlite:PATH or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE."
  )
  var from: String

  @Option(help: "Where to copy to, as --from; it must be empty unless --resume.")
  var to: String

  @Option(
    help:
      "The source's picture directory, when it is SQLite (default: PATH-pictures; a backup's is its pictures directory)."
  )
  var fromPicturesDir: String?

  @Option(help: "The target's picture directory, when it is SQLite (default: PATH-pictures).")
  var toPicturesDir: String?

  @Option(help: "The PostgreSQL schema holding Roster's tables, on either side.")
  var postgresSchema: String = "roster"

  @Flag(help: "Go on with a copy that was interrupted: skip what the target already has.")
  var resume = false

  @Flag(
    inversion: .prefixedNo,
    help: "Compare every employee, counter and calendar after the copy."
  )
  var verify = true

  @Option(help: "Pictures copied at once.")
  var pictureConcurrency: Int = 8

  @Option(help: "The author recorded in the target's change log.")
  var author: String = "roster copy"

  func validate() throws {
    _ = try Endpoint(self.from)
    _ = try Endpoint(self.to)
    if self.from == self.to { throw ValidationError("--from and --to name the same database") }
    if case .sqlite(let path) = try Endpoint(self.from),
      !FileManager.default.fileExists(atPath: path)
    {
      throw ValidationError("--from \(self.from): no such database")
    }
    if self.pictureConcurrency < 1 {
      throw ValidationError("--picture-concurrency must be at least 1")
    }
  }

  func run() async throws {
    let copy = DirectoryCopy(
      context: WriteContext(author: self.author),
      pictureConcurrency: self.pictureConcurrency,
      // Each step as it happens, unbuffered, for whoever watches a long copy through a pipe.
      progress: { FileHandle.standardOutput.write(Data("\($0)\n".utf8)) },
      meters: .standardError
    )
    try await self.withStore(try Endpoint(self.from), pictures: self.fromPicturesDir, reading: true)
    { source in
      try await self.withStore(try Endpoint(self.to), pictures: self.toPicturesDir, reading: false)
      { target in
        let clock = ContinuousClock()
        let started = clock.now
        let report = try await copy.copy(from: source, to: target, resume: self.resume)
        print(
          "copied \(report.employeesCopied) employees, \(report.picturesCopied) pictures and "
            + "\(report.salesCopied) sales in \(Self.seconds(clock.now - started)) s"
            + (self.resume
              ? " (already there: \(report.employeesSkipped) employees, \(report.picturesSkipped) pictures, \(report.salesSkipped) sales)"
              : "")
        )
        guard self.verify else { return }
        let checked = clock.now
        let verification = try await copy.verify(source: source, target: target)
        for difference in verification.differences { print("difference: \(difference)") }
        if verification.differenceCount > 0 {
          print("verify: \(verification.differenceCount) differences")
          throw ExitCode(1)
        }
        print(
          "verified \(verification.employees) employees, \(verification.departments) departments' counters "
            + "and \(verification.sales) sales' calendars: equal, in \(Self.seconds(clock.now - checked)) s"
        )
      }
    }
  }

  /// One side of a copy.
  enum Endpoint {
    case sqlite(path: String)
    case postgres(PostgresURL)

    init(_ text: String) throws {
      if text.hasPrefix("sqlite:") {
        let path = String(text.dropFirst("sqlite:".count))
        if path.isEmpty { throw ValidationError("'\(text)': sqlite: needs the database's path") }
        self = .sqlite(path: path)
      } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
        self = .postgres(try PostgresURL(text))
      } else {
        throw ValidationError(
          "'\(PostgresURL.redacted(text))' is neither sqlite:PATH nor a postgres:// URL"
        )
      }
    }
  }

  /// Opens `endpoint` for the time `body` runs, a SQLite one with its pictures in `pictures`
  /// if given.
  private func withStore(
    _ endpoint: Endpoint,
    pictures: String?,
    reading: Bool,
    _ body: (any StoreBackend) async throws -> Void
  ) async throws {
    switch endpoint {
    case .sqlite(let path):
      // The source's pages are read once: a small page cache keeps memory flat. The target
      // keeps the server's page cache, which its index updates need. Neither maps more than
      // 64 MiB of its file.
      var configuration = StoreConfiguration(path: path)
      configuration.pictures.directory = pictures
      configuration.mmapSize = StoreConfiguration.offlineMmapSize
      if reading { configuration.cacheSizeKiB = 8 * 1024 }
      try await body(try SQLiteStore(configuration: configuration))
    case .postgres(let url):
      var configuration = PostgresConfiguration(url: url)
      configuration.schema = self.postgresSchema
      try await PostgresStore.withOffline(configuration, label: "roster.copy", body)
    }
  }

  private static func seconds(_ duration: Duration) -> String {
    String(format: "%.1f", duration.seconds)
  }
}
