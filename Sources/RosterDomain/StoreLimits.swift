/// The bounds every backend enforces, so that every reply stays bounded and every backend
/// accepts the same input.
public enum StoreLimits {
  /// The most rows one page of employees may hold.
  public static let maximumPageSize = 1000
  /// The most employees one `deleteEmployees` call removes.
  public static let maximumDeleteLimit = 100_000
  /// The most changes one `changes(after:)` call returns.
  public static let maximumChangePage = 1000
  /// The earliest sale date accepted.
  public static let earliestSaleDate = "1900-01-01"
  /// The largest amount one sale may have, in cents (a billion in currency units): ten
  /// million such sales still sum exactly in the 64-bit totals the rollups keep.
  public static let largestSaleCents: Int64 = 100_000_000_000
  /// How far ahead of today a sale may be dated.
  public static let saleDaysAhead = 366
}
