internal import Logging
public import RosterStore
public import ServiceLifecycle

extension SQLiteStore: StoreBackend {
  /// The store's lifecycle (`StoreBackend`): background work off the request path until
  /// graceful shutdown or cancellation, then a final TRUNCATE checkpoint that moves the WAL
  /// into the database file. Every write the server's calls made was committed before they
  /// answered, and the server shuts down before the store, so the writer is empty by then.
  ///
  /// The background work: WAL checkpoints on their own connection every
  /// `checkpointInterval` when something was committed, the memory budget's gauges, pruning
  /// of the change log to its retention policy every `pruneInterval`, and a sweep of picture
  /// files nothing references (at start, which clears uploads a crash cut off, then with
  /// every prune).
  public func run() async throws {
    await cancelWhenGracefulShutdown { await self.maintain() }
    let (walPages, _) = try await self.checkpoint(truncate: true)
    self.logger.info("store closed", metadata: ["wal_pages_checkpointed": "\(walPages)"])
  }

  /// Runs until cancelled.
  private func maintain() async {
    let interval = self.configuration.checkpointInterval
    var lastCommits = -1
    var sincePrune = Duration.zero
    await self.sweepPictures()
    while !Task.isCancelled {
      do {
        try await Task.sleep(for: interval)
      } catch {
        return
      }
      sincePrune += interval
      self.recordMemoryMetrics()
      do {
        let commits = self.writerStatistics.commits
        if commits != lastCommits {
          lastCommits = commits
          try await self.checkpoint()
        }
        if sincePrune >= self.configuration.pruneInterval {
          sincePrune = .zero
          let pruned = try await self.pruneChangeLog()
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
      let removed = try await self.sweepPictureFiles()
      if removed > 0 {
        self.logger.info("removed unreferenced picture files", metadata: ["files": "\(removed)"])
      }
    } catch {
      self.logger.warning("picture sweep failed", metadata: ["error": "\(error)"])
    }
  }
}
