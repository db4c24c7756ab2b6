import Foundation
import RosterDomain
import RosterSeed
import Testing

/// The seed format's hand-written reader and writer against Foundation's JSON: what one
/// writes, the other reads the same, on random records with every kind of character.
@Suite("Seed files against Foundation's JSON")
struct SeedFileOracleTests {
  /// Characters a field may hold: ASCII, JSON's escapes, control characters, accents, CJK,
  /// an emoji outside the Basic Multilingual Plane (a surrogate pair in `\u` form).
  static let pool = Array("aZ09 -'.,@\"\\/\n\r\t\u{01}\u{1F}éÑøß日本😀{}[]:")

  static func text(_ random: inout SplitMix64, upTo limit: Int) -> String {
    String(
      (0 ..< Int.random(in: 0 ... limit, using: &random)).map { _ in
        Self.pool.randomElement(using: &random)!
      }
    )
  }

  static func records(count: Int, seed: UInt64) -> [SeedRecord] {
    var random = SplitMix64(seed: seed)
    return (0 ..< count).map { _ in
      var employee = Employee()
      employee.guid = UUID().uuidString.lowercased()
      employee.name = Self.text(&random, upTo: 20)
      employee.department = Self.text(&random, upTo: 10)
      employee.email = Self.text(&random, upTo: 12)
      employee.phone = Self.text(&random, upTo: 8)
      employee.address = Self.text(&random, upTo: 30)
      employee.about = Self.text(&random, upTo: 60)
      employee.active = Bool.random(using: &random)
      employee.startDate = CivilDate(dayNumber: Int.random(in: 0 ... 20_000, using: &random)).text
      employee.vacationDays = Int.random(in: 0 ... 60, using: &random)
      let picture = Bool.random(using: &random) ? Self.text(&random, upTo: 10) + ".jpg" : nil
      return SeedRecord(employee: employee, picture: picture)
    }
  }

  /// `records` as Foundation writes them: keys in another order, `/` escaped, non-ASCII as is.
  static func foundationJSON(_ records: [SeedRecord], pretty: Bool) throws -> Data {
    let objects: [[String: Any]] = records.map { record in
      let e = record.employee
      return [
        "guid": e.guid, "name": e.name, "department": e.department, "email": e.email,
        "phone": e.phone, "address": e.address, "about": e.about, "active": e.active,
        "startDate": e.startDate, "vacationDays": e.vacationDays,
        "picture": record.picture.map { $0 as Any } ?? NSNull(),
        // A key the format does not know, with a nested value, is skipped.
        "unknown": ["nested": [1, 2.5, "x", true, NSNull()]],
      ]
    }
    return try JSONSerialization.data(
      withJSONObject: objects,
      options: pretty ? [.prettyPrinted, .sortedKeys] : []
    )
  }

  static func temporaryFile() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("seed-\(UUID()).json").path
  }

  @Test("what Foundation writes, SeedFile reads as the same records", arguments: [false, true])
  func readsFoundationsJSON(pretty: Bool) throws {
    let records = Self.records(count: 400, seed: pretty ? 1 : 2)
    let path = Self.temporaryFile()
    defer { try? FileManager.default.removeItem(atPath: path) }
    try Self.foundationJSON(records, pretty: pretty).write(to: URL(fileURLWithPath: path))
    #expect(try SeedFile.readAll(path) == records)
  }

  @Test("what SeedFile writes, Foundation reads as the same values")
  func foundationReadsSeedFiles() throws {
    let records = Self.records(count: 400, seed: 3)
    let path = Self.temporaryFile()
    defer { try? FileManager.default.removeItem(atPath: path) }
    try SeedFile.write(records, to: path)
    let parsed = try JSONSerialization.jsonObject(
      with: Data(contentsOf: URL(fileURLWithPath: path))
    )
    let objects = try #require(parsed as? [[String: Any]])
    #expect(objects.count == records.count)
    for (object, record) in zip(objects, records) {
      let e = record.employee
      #expect(object["guid"] as? String == e.guid)
      #expect(object["name"] as? String == e.name)
      #expect(object["about"] as? String == e.about)
      #expect(object["address"] as? String == e.address)
      #expect(object["active"] as? Bool == e.active)
      #expect(object["vacationDays"] as? Int == e.vacationDays)
      #expect((object["picture"] as? String) == record.picture)
    }
    #expect(try SeedFile.readAll(path) == records)
  }

  @Test(
    "a file cut short or broken is refused with a message that says where",
    arguments: [
      #"[{"guid":"a","name":"x"#, #"[{"guid":"a"},"#, #"[{"guid" "a"}]"#, #"{"guid":"a"}"#,
      #"[{"name":"\u12"}]"#, #"[{"vacationDays":1e}]"#, "",
      // Not a whole number of days: past Int's range (found by the fuzzer: it trapped), a
      // fraction, an infinity.
      #"[{"vacationDays":77777777777777777777777777}]"#, #"[{"vacationDays":1.5}]"#,
      #"[{"vacationDays":1e999}]"#,
    ]
  )
  func refusesBrokenFiles(text: String) throws {
    let path = Self.temporaryFile()
    defer { try? FileManager.default.removeItem(atPath: path) }
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    let error = #expect(throws: StoreError.self) { _ = try SeedFile.readAll(path) }
    #expect(error?.message.contains("at byte") == true, "\(String(describing: error))")
  }
}
