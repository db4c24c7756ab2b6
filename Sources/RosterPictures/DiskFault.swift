internal import CoreMetrics
public import RosterDomain

#if canImport(Glibc)
internal import Glibc
#endif

/// A write the disk refused: full, or an I/O error. The store answers the call that hit it
/// with a status naming the cause (`resourceExhausted` for a full disk, whose writes resume
/// by themselves once space is freed; `unavailable` for an I/O error) and counts it in
/// `roster_disk_faults_total{cause}`; nothing the call wrote was acknowledged.
public struct DiskFault: Sendable {
  /// What was being done: `database commit`, `picture write`, `picture fsync`, ….
  public var operation: String
  /// Whether the disk was full (else an I/O error).
  public var full: Bool
  /// The system's or SQLite's own words.
  public var detail: String

  public init(operation: String, full: Bool, detail: String) {
    self.operation = operation
    self.full = full
    self.detail = detail
  }

  /// From a failed system call's `errno`.
  public init(operation: String, errno code: Int32) {
    self.operation = operation
    self.full = code == ENOSPC || code == EDQUOT
    self.detail = String(cString: strerror(code))
  }

  private static let full = Counter(
    label: "roster_disk_faults_total",
    dimensions: [("cause", "disk_full")]
  )
  private static let io = Counter(
    label: "roster_disk_faults_total",
    dimensions: [("cause", "io_error")]
  )

  /// Counts it in `/metrics`.
  public func record() {
    (self.full ? Self.full : Self.io).increment()
  }

  /// The status the call gets.
  public var storeError: StoreError {
    if self.full {
      return StoreError(
        .resourceExhausted,
        "the disk is full (\(self.operation): \(self.detail)); nothing was written, and writes resume once space is freed"
      )
    }
    return StoreError(
      .unavailable,
      "a disk I/O error stopped the write (\(self.operation): \(self.detail)); nothing was written"
    )
  }
}
