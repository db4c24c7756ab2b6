import Foundation
import RosterDomain
import RosterSeed
import Testing

/// A seed file read a batch at a time, for its employees and again for its pictures, in
/// bounded memory: the pages parsed are given back as the reading goes (`releaseParsed`).
@Suite("Seed files read as streams")
struct SeedFileStreamTests {
  /// 6,000 records of about 400 bytes (2.4 MB, many times the 256 KiB a release waits for),
  /// only the last 1,500 with a picture: the first batches hold none.
  static func write(to path: String) throws -> [SeedRecord] {
    let records = (0 ..< 6_000).map { index in
      var employee = Employee()
      employee.guid = UUID().uuidString.lowercased()
      employee.name = "Employee \(index)"
      employee.department = "Department \(index % 7)"
      employee.about = String(repeating: "x", count: 300) + "\(index)"
      employee.startDate = "2020-01-15"
      return SeedRecord(employee: employee, picture: index >= 4_500 ? "p\(index % 16).jpg" : nil)
    }
    try SeedFile.write(records, to: path)
    return records
  }

  @Test("every record comes back whole, in order, after its pages were given back")
  func employeesWhole() async throws {
    let path = NSTemporaryDirectory() + "/seed-\(UUID().uuidString).json"
    defer { try? FileManager.default.removeItem(atPath: path) }
    let records = try Self.write(to: path)
    var read: [UpsertRow] = []
    for try await batch in try SeedFile.batches(path, size: 250) { read += batch }
    #expect(read.count == records.count)
    let same =
      read.map(\.guid) == records.map(\.employee.guid)
      && read.map(\.changes.about) == records.map { .some($0.employee.about) }
    #expect(same, "the records read differ from those written")
  }

  @Test("the pictures come in batches past the records without one, each with its path")
  func picturesStreamed() async throws {
    let path = NSTemporaryDirectory() + "/seed-\(UUID().uuidString).json"
    defer { try? FileManager.default.removeItem(atPath: path) }
    let records = try Self.write(to: path)
    var batches: [[PictureFile]] = []
    for try await batch in try SeedFile.pictures(path, in: "/pool", size: 1_000) {
      batches.append(batch)
    }
    let expected = records.compactMap { record in
      record.picture.map { PictureFile(guid: record.employee.guid, path: "/pool/" + $0) }
    }
    #expect(batches.allSatisfy { !$0.isEmpty })
    let read = batches.flatMap { $0 }
    #expect(read.count == expected.count)
    let same = read == expected
    #expect(same, "the pictures read differ from the records'")
  }
}
