internal import Logging
internal import RosterSQLite
internal import RosterDomain

/// Background work on the store, off the request path: WAL checkpoints on their own
/// connection, the memory budget's gauges, pruning of the change log to its retention policy, and a sweep of picture
/// files nothing references (at start, which clears uploads a crash cut off, then with every
/// prune).
///
/// ```swift
/// try await StoreMaintenance(store: store, config: config, logger: logger).run()
/// ```
struct StoreMaintenance: Sendable {
  let store: SQLiteStore
  let config: ServerConfig
  let logger: Logger

  /// Runs until cancelled.
  func run() async throws {
    var lastCommits = -1
    var sincePrune = Duration.zero
    await self.sweepPictures()
    while !Task.isCancelled {
      do {
        try await Task.sleep(for: self.config.checkpointInterval)
      } catch {
        return
      }
      sincePrune += self.config.checkpointInterval
      self.store.recordMemoryMetrics()
      do {
        let commits = self.store.writerStatistics.commits
        if commits != lastCommits {
          lastCommits = commits
          try await self.store.checkpoint()
        }
        if sincePrune >= self.config.pruneInterval {
          sincePrune = .zero
          let pruned = try await self.store.pruneChangeLog()
          if pruned > 0 {
            self.logger.info("pruned the change log", metadata: ["changes": "\(pruned)"])
          }
          await self.sweepPictures()
        }
      } catch is CancellationError {
        return
      } catch {
        self.logger.warning("store maintenance failed", metadata: ["error": "\(error)"])
      }
    }
  }

  private func sweepPictures() async {
    do {
      let removed = try await self.store.sweepPictureFiles()
      if removed > 0 {
        self.logger.info("removed unreferenced picture files", metadata: ["files": "\(removed)"])
      }
    } catch {
      self.logger.warning("picture sweep failed", metadata: ["error": "\(error)"])
    }
  }
}
