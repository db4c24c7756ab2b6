/// A bulk write's rows, gathered into chunks as they arrive, each chunk written while the next
/// one fills: the input is read and checked on one core while the database writes on the
/// other. One chunk is written at a time, in order, since a chunk may update what the one
/// before it inserted; memory holds at most two chunks however long the input is.
///
/// ```swift
/// let summary = try await ChunkedWrites.run(batches, chunkRows: 5_000) { row, index in
///   (index, try row.checked())
/// } write: { chunk in
///   try await self.insert(chunk)
/// }
/// ```
public enum ChunkedWrites {
  /// Writes `batches`' rows, `chunkRows` at a time.
  ///
  /// - Parameters:
  ///   - check: a row, with its zero-based index in the input, as the `write` takes it. A
  ///     `StoreError` it throws refuses the row (reported with the index, and skipping only
  ///     that row); any other error stops the write.
  ///   - write: one chunk of checked rows, in a transaction of its own.
  /// - Returns: the chunks' summaries and the refusals, in input order.
  public static func run<Batches: AsyncSequence, Row: Sendable>(
    _ batches: Batches,
    chunkRows: Int,
    check: (Batches.Element.Element, Int) throws -> Row,
    write: @escaping @Sendable ([Row]) async throws -> ImportSummary
  ) async throws -> ImportSummary where Batches.Element: Sequence {
    let chunkRows = max(1, chunkRows)
    return try await withThrowingTaskGroup(of: ImportSummary.self) { group in
      var summary = ImportSummary()
      var chunk: [Row] = []
      chunk.reserveCapacity(chunkRows)
      var index = 0
      var writing = false
      func send() async throws {
        if writing, let done = try await group.next() { summary.merge(done) }
        let rows = chunk
        chunk.removeAll(keepingCapacity: true)
        group.addTask { try await write(rows) }
        writing = true
      }
      for try await batch in batches {
        for row in batch {
          defer { index += 1 }
          do {
            chunk.append(try check(row, index))
          } catch let error as StoreError {
            summary.reject(index: index, reason: error.message)
          }
          if chunk.count == chunkRows { try await send() }
        }
      }
      if !chunk.isEmpty { try await send() }
      for try await done in group { summary.merge(done) }
      summary.rejected.sort { $0.index < $1.index }
      return summary
    }
  }
}
