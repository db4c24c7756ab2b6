internal import PostgresNIO

/// The store's background work while it runs (`run()`): the periodic maintenance and the
/// pool's keep-alive.
extension PostgresStore {
  /// Prunes the change log, removes unreferenced pictures and folds the counters' deltas
  /// every `maintenanceInterval`.
  func maintain() async throws {
    _ = try? await self.pictures.sweep { [] }
    while !Task.isCancelled {
      do {
        try await self.pruneChangeLog()
        try await self.sweepPictures()
        try await self.compactCounters()
      } catch {
        // Stopped: the store is closing (a cancelled read answers `callCancelled`).
        if Task.isCancelled || error is CancellationError { return }
        self.logger.warning("maintenance failed", metadata: ["error": "\(error)"])
      }
      try await Task.sleep(for: self.configuration.maintenanceInterval)
    }
  }

  /// Every `keepAliveInterval`, a trivial statement on each idle pooled connection (as many at
  /// once as the pool has idle, so each lease takes a connection of its own): what
  /// postgres-nio's keep-alive does, without its timers per statement. A connection that does
  /// not answer within `answerTimeout` is closed (`LeftBehind`). Asking for as many as the
  /// pool may hold instead had it open them all at once, a burst of new backends 30 s after
  /// start that slowed the calls of that moment (docs/performance.md); asking for as many as
  /// it has open, while other work held some, opened as many more each round.
  func keepAlive() async throws {
    while !Task.isCancelled {
      try await Task.sleep(for: self.configuration.keepAliveInterval)
      let count = await withTaskGroup(of: Bool.self) { pings in
        for _ in 0 ..< self.pool.idleConnections {
          pings.addTask {
            await FirstAnswer.within(self.answerTimeout) {
              (try? await self.rows("SELECT 1 AS roster_keep_alive")) != nil
            }
          }
        }
        return await pings.reduce(0) { silent, answered in answered ? silent : silent + 1 }
      }
      if count > 0, !Task.isCancelled {
        self.logger.warning(
          "pooled connections did not answer their keep-alive",
          metadata: ["connections": "\(count)"]
        )
      }
    }
  }
}
