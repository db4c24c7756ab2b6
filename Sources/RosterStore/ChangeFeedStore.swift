public import RosterDomain

/// The persistent history of changes, numbered in commit order, for `WatchChanges`.
public protocol ChangeFeedStore: Sendable {
  /// The newest change's sequence number; 0 when there is none.
  var latestChange: Int64 { get }

  /// Up to `limit` changes strictly after `sequence`, oldest first. Throws `outOfRange` when
  /// changes after `sequence` were already pruned or `sequence` is past the newest.
  func changes(after sequence: Int64, limit: Int) async throws -> [Change]

  /// Returns once a change newer than `sequence` is committed, with the newest sequence then;
  /// throws `cancelled` when the calling task is cancelled or the store closes.
  func waitForChanges(after sequence: Int64) async throws -> Int64
}
