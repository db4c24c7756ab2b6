/// A synchronous sequence handed out in arrays of `size`, as an async sequence: the shape
/// the store's bulk writes take, for callers that generate or read rows rather than stream
/// them. Once its task is cancelled (the server's shutdown during a seed), the next batch
/// throws `CancellationError`, so a bulk write stops between batches.
public struct AsyncBatches<Base: Sequence & Sendable>: AsyncSequence, Sendable {
  public typealias Element = [Base.Element]
  let base: Base
  let size: Int

  /// Batches of `size` elements of `base` (the last may be shorter).
  public init(_ base: Base, size: Int) {
    self.base = base
    self.size = Swift.max(1, size)
  }

  public func makeAsyncIterator() -> Iterator {
    Iterator(base: self.base.makeIterator(), size: self.size)
  }

  /// Pulls the next `size` elements.
  public struct Iterator: AsyncIteratorProtocol {
    var base: Base.Iterator
    let size: Int

    public mutating func next() async throws -> [Base.Element]? {
      try Task.checkCancellation()
      var batch: [Base.Element] = []
      batch.reserveCapacity(self.size)
      while batch.count < self.size, let element = self.base.next() { batch.append(element) }
      return batch.isEmpty ? nil : batch
    }
  }
}
