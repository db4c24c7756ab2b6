internal import Foundation
public import Logging

#if canImport(Glibc)
internal import Glibc
#endif

/// Code and read-only data that only starting up touched, given back once the server listens.
///
/// The kernel maps file pages in blocks of 16 (64 KiB) around each fault, and a mapped page
/// stays counted in the process's resident set until it is unmapped. Starting up (the
/// dynamic loader's relocations and symbol lookups, argument parsing, opening and migrating
/// the store, Foundation's and the runtime's set-up) touches code all over the executable and
/// Swift's libraries once, and that code then stays resident for the life of the server.
/// `release()` unmaps, from this process only, the read-only mappings of the executable and
/// of shared libraries that hold no private copy of a page (code, read-only data, relocation
/// tables): what the server runs afterwards maps back in from the page cache on its first
/// touch (a minor fault). Writable mappings, and the read-only ones that hold private copies
/// (relocated data that was made read-only afterwards), are left alone: unmapping those would
/// lose the copies.
public enum StartupPages {
  /// Unmaps the pages described above; returns, for the log, the MiB that were resident in
  /// them (`MiB`) and this process's `RssFile` just before (`rss_file_kib_before`), so that the
  /// release's effect shows in `/proc/PID/status` afterwards.
  public static func release() -> Logger.Metadata {
    let before = Self.residentFileKiB() ?? 0
    let released = Self.unmap()
    return ["MiB": "\(released / 1024 / 1024)", "rss_file_kib_before": "\(before)"]
  }

  /// Unmaps the pages; returns the bytes that were resident in them.
  private static func unmap() -> Int {
    // Read to the end: a file in /proc has no size, and a whole-file read stops at its first block.
    guard let file = FileHandle(forReadingAtPath: "/proc/self/smaps"),
      let bytes = try? file.readToEnd()
    else { return 0 }
    try? file.close()
    let smaps = String(decoding: bytes, as: UTF8.self)
    let executable =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    var released = 0
    var mapping: Mapping?
    for line in smaps.split(separator: "\n", omittingEmptySubsequences: true) {
      if let header = Mapping(header: line, executable: executable) {
        released += mapping?.release() ?? 0
        mapping = header
      } else if line.hasPrefix("Rss:") {
        mapping?.residentKiB = Self.kibibytes(line)
      } else if line.hasPrefix("Anonymous:") {
        mapping?.privateCopiesKiB = Self.kibibytes(line)
      }
    }
    released += mapping?.release() ?? 0
    return released
  }

  /// This process's file-backed resident memory (`RssFile` in `/proc/self/status`), in KiB;
  /// nil where there is no such file.
  static func residentFileKiB() -> Int? {
    guard let file = FileHandle(forReadingAtPath: "/proc/self/status"),
      let bytes = try? file.readToEnd()
    else { return nil }
    try? file.close()
    let status = String(decoding: bytes, as: UTF8.self)
    return status.split(separator: "\n").first { $0.hasPrefix("RssFile:") }.map(Self.kibibytes)
  }

  /// The number in a line such as `Rss:   1234 kB`.
  private static func kibibytes(_ line: Substring) -> Int {
    line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap {
      Int($0)
    } ?? 0
  }

  /// One mapping of `/proc/self/smaps`, and what is known of it so far.
  private struct Mapping {
    let start: UInt
    let end: UInt
    /// Read-only, and of the executable or a shared library.
    let isReadOnlyObject: Bool
    var residentKiB = 0
    var privateCopiesKiB = -1

    /// Parses a header line: `START-END PERMS OFFSET DEVICE INODE [PATH]`; nil for the other
    /// lines.
    init?(header line: Substring, executable: String) {
      let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
      guard fields.count >= 5 else { return nil }
      let range = fields[0].split(separator: "-")
      guard range.count == 2, let start = UInt(range[0], radix: 16),
        let end = UInt(range[1], radix: 16)
      else { return nil }
      let permissions = fields[1]
      let path = fields.count == 6 ? fields[5].trimmingCharacters(in: .whitespaces) : ""
      self.start = start
      self.end = end
      self.isReadOnlyObject =
        permissions.count == 4 && permissions.dropFirst().first == "-"
        && path.hasPrefix("/") && (path == executable || path.contains(".so"))
    }

    /// Unmaps the mapping's pages when that loses nothing; returns the bytes that were resident.
    func release() -> Int {
      guard self.isReadOnlyObject, self.privateCopiesKiB == 0, self.residentKiB > 0,
        let address = UnsafeMutableRawPointer(bitPattern: self.start)
      else { return 0 }
      guard madvise(address, Int(self.end - self.start), MADV_DONTNEED) == 0 else { return 0 }
      return self.residentKiB * 1024
    }
  }
}
