import Foundation
import GRDB
import RosterDomain
import TestSupport
import Testing

@testable import RosterSQLite
@testable import RosterStore

/// Pages written from SQLite's bytes (`writtenEmployeePages`) carry only valid UTF-8, as
/// protobuf's strings must: SQLite keeps whatever bytes a text was given.
@Suite("Pages written from SQLite's bytes", .timeLimit(.minutes(10)))
struct WrittenPagesTests {
  /// Records each row's `about` as the writer was given it.
  struct AboutWriter: EmployeeRowWriter {
    func append(_ row: EmployeeRow, to bytes: inout [UInt8]) {
      bytes += Array(row.about) + [0]
    }

    func append(_ employee: Employee, to bytes: inout [UInt8]) {
      bytes += Array(employee.about.utf8) + [0]
    }
  }

  @Test("a text that is not UTF-8 in the file is written repaired, as every other read gives it")
  func invalidText() async throws {
    try await withTemporaryStore(employees: 3) { store async throws in
      // "a", a lead byte without its continuation, "(b".
      let invalid: [UInt8] = [0x61, 0xC3, 0x28, 0x62]
      try store.write { db in
        try db.execute(
          sql: "UPDATE employees SET about = CAST(? AS TEXT) WHERE id = 2",
          arguments: [Data(invalid)]
        )
      }
      let pages = try await store.writtenEmployeePages(
        fields: [.about],
        filter: EmployeeFilter(),
        order: .name,
        after: nil,
        limit: 10,
        count: 1,
        writer: AboutWriter()
      )
      let abouts = pages[0].bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast()
        .map(Array.init)
      #expect(abouts.count == 3)
      let repaired = Array(String(decoding: invalid, as: UTF8.self).utf8)
      #expect(abouts.contains(repaired))
      for about in abouts {
        #expect(
          String(validating: about, as: UTF8.self) != nil,
          "a written text is not UTF-8: \(about)"
        )
      }
      // The point read gives the same repaired text.
      let guid = try await store.read(.interactive) { db in
        try String.fetchOne(db, sql: "SELECT guid FROM employees WHERE id = 2")!
      }
      #expect(Array(try await store.employee(guid: guid, fields: [.about]).about.utf8) == repaired)
    }
  }

  @Test("the UTF-8 check: ASCII of any length, multi-byte text, and each way bytes are not UTF-8")
  func utf8Check() {
    func valid(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer(EmployeeRow.isValidUTF8) }
    #expect(valid([]))
    for count in [1, 7, 8, 9, 16, 17, 300] {
      #expect(valid(Array(repeating: 0x61, count: count)))
      #expect(!valid(Array(repeating: 0x61, count: count) + [0xFF]))
    }
    #expect(valid(Array("José Núñez — 日本 🎉".utf8)))
    #expect(
      valid(Array(repeating: 0x61, count: 9) + Array("é".utf8) + Array(repeating: 0x62, count: 9))
    )
    #expect(!valid([0xC3]))  // cut short
    #expect(!valid([0xC3, 0x28]))  // no continuation
    #expect(!valid([0x80]))  // a continuation alone
    #expect(!valid([0xC0, 0xAF]))  // overlong
    #expect(!valid([0xED, 0xA0, 0x80]))  // a surrogate
    #expect(!valid(Array(repeating: 0x61, count: 8) + [0xE6, 0x97]))  // cut short after a full word
    #expect(!valid([0xE0, 0x80, 0x80]))  // a three-byte overlong
    #expect(!valid([0xF0, 0x80, 0x80, 0x80]))  // a four-byte overlong
    #expect(!valid([0xF4, 0x90, 0x80, 0x80]))  // past U+10FFFF
    #expect(!valid([0xF5, 0x80, 0x80, 0x80]))  // no such lead byte
    // Each range's edge.
    #expect(valid([0xF4, 0x8F, 0xBF, 0xBF, 0xED, 0x9F, 0xBF, 0xE0, 0xA0, 0x80, 0xC2, 0x80]))
    // The same verdicts as the standard library's, over random bytes.
    var random = SplitMix64(seed: 7)
    for _ in 0 ..< 2_000 {
      let bytes = (0 ..< Int(random.next() % 12)).map { _ in
        random.next() % 3 == 0
          ? UInt8(truncatingIfNeeded: random.next()) : UInt8(0x80 | random.next() % 0x40)
      }
      let lead: [UInt8] = [[], [0xE6], [0xF0, 0x9F], [0xC3], [0x61]][Int(random.next() % 5)]
      let all = lead + bytes
      #expect(valid(all) == (String(validating: all, as: UTF8.self) != nil), "\(all)")
    }
  }
}
