import Foundation
import RosterDomain

@testable import RosterSeed

/// The files `roster import` reads: the seed file (JSON) and the sales CSV.
enum ImportTargets {
  /// A seed file. What must hold: it parses to the same records whatever the batch size (or
  /// fails either way); every batch moves on; what parses, written out again, reads back
  /// the same.
  static func seed(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let batch = 1 + input.choice(4)
    let file = Array(input.rest())
    let whole = file.withUnsafeBufferPointer { Self.seedRecords($0, batch: 1_000) }
    let batched = file.withUnsafeBufferPointer { Self.seedRecords($0, batch: batch) }
    require(whole == batched, "batches of \(batch) read \(String(describing: batched))")
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
    var input = FuzzInput(bytes)
    let batch = 1 + input.choice(4)
    let file = Array(input.rest())
    let whole = file.withUnsafeBufferPointer { Self.sales($0, batch: 1_000) }
    let batched = file.withUnsafeBufferPointer { Self.sales($0, batch: batch) }
    require(whole == batched, "batches of \(batch): \(batched) against \(whole)")
    guard case .success(let rows) = whole else { return }
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
