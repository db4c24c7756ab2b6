import Foundation
import RosterDomain

@testable import RosterSeed

/// The files `roster import` reads: the seed file (JSON) and the sales CSV.
enum ImportTargets {
  /// A seed file. What must hold: it parses to the same records whatever the batch size (or
  /// fails either way); every batch moves on; what parses, written out again, reads back
  /// the same.
  static func seed(_ bytes: UnsafeBufferPointer<UInt8>) {
    let whole = Self.sameInBatches(bytes, read: Self.seedRecords)
    guard let records = whole, !records.isEmpty else { return }
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("roster-fuzz-seed-\(getpid()).json").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    do {
      try SeedFile.write(records, to: path)
      let again = try SeedFile.readAll(path)
      require(again == records, "written and read again: \(again) for \(records)")
    } catch {
      require(false, "records it read could not be written and read again: \(error)")
    }
  }

  /// The file after the input's first byte, read whole and in batches of 1-4 (that byte
  /// says): the two must agree. What was read whole.
  private static func sameInBatches<Read: Equatable>(
    _ bytes: UnsafeBufferPointer<UInt8>,
    read: (UnsafeBufferPointer<UInt8>, Int) -> Read
  ) -> Read {
    var input = FuzzInput(bytes)
    let batch = 1 + input.choice(4)
    let file = Array(input.rest())
    let whole = file.withUnsafeBufferPointer { read($0, 1_000) }
    let batched = file.withUnsafeBufferPointer { read($0, batch) }
    require(whole == batched, "batches of \(batch): \(batched) against \(whole)")
    return whole
  }

  /// The rows of `bytes` read `batch` at a time; nil when the file is refused.
  private static func seedRecords(_ bytes: UnsafeBufferPointer<UInt8>, batch: Int) -> [SeedRecord]?
  {
    var parser = SeedParser(bytes: bytes)
    var atEnd = false
    var records: [SeedRecord] = []
    while !atEnd {
      let before = parser.position
      guard let some = try? parser.readRecords(limit: batch, atEnd: &atEnd) else { return nil }
      require(atEnd || (!some.isEmpty && parser.position > before), "a batch did not move on")
      records += some
    }
    return records
  }

  /// A sales CSV. What must hold: the same rows whatever the batch size (or a refusal either
  /// way, on the same line); every amount read writes back to text that reads the same.
  static func salesCSV(_ bytes: UnsafeBufferPointer<UInt8>) {
    guard case .success(let rows) = Self.sameInBatches(bytes, read: Self.sales) else { return }
    for row in rows {
      let text = SalesFile.amountText(cents: row.amountCents)
      require(
        SalesFile.cents(Substring(text)) == row.amountCents,
        "\(row.amountCents) cents written as \(text)"
      )
    }
  }

  private static func sales(
    _ bytes: UnsafeBufferPointer<UInt8>,
    batch: Int
  ) -> Result<[SaleRow], StoreError> {
    var rows: [SaleRow] = []
    var position = 0
    var line = 0
    while position < bytes.count {
      do {
        let (some, next, nextLine) = try SalesFile.parse(
          bytes,
          from: position,
          line: line,
          limit: batch
        )
        require(next > position, "a batch did not move on")
        rows += some
        (position, line) = (next, nextLine)
      } catch let error as StoreError {
        return .failure(error)
      } catch {
        require(false, "refused with \(error)")
      }
    }
    return .success(rows)
  }
}
