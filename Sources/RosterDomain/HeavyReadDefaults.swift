/// The admission of heavy reads (searches, counts that visit employees, grouped aggregates,
/// calendars) by default, the same on both backends and behind `--heavy-concurrency` and
/// `--heavy-queue`: how many run at once, and how many may wait for a place before one more is
/// refused with RESOURCE_EXHAUSTED.
public enum HeavyReadDefaults {
  public static let width = 2
  public static let queueLimit = 16
}
