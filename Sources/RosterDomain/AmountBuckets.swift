/// Sale amounts in buckets by their first two digits, for medians that never read every sale.
///
/// A bucket is `digits * 100 + leading`, where `digits` is the number of digits of the amount
/// in cents and `leading` its first two (its only one below 10 cents): 31,250 cents is in
/// bucket 531, with every amount from 31,000 to 31,099. Buckets sort as their amounts do, a
/// bucket spans at most a tenth of its smallest amount, and both backends compute it in SQL
/// from the amount's text (`AmountBuckets.sql`), so the triggers that keep the counts and the
/// reads agree.
///
/// The backends keep, per department, a count of sales per bucket for each year and each month.
/// A median over any date range then adds up a few hundred bucket counts (whole years, whole
/// months, and the sales of the partial months at either end), finds the bucket that holds
/// the middle sale, and reads that one bucket's amounts in order.
public enum AmountBuckets {
  /// The most groups a page of medians from the buckets holds (by department): each takes
  /// a few to a few hundred milliseconds at 10M sales, so a page ends early (AIP-158), at
  /// this many or at `pageBudget` (`MedianPageClock`).
  public static let mediansPerPage = 5

  /// The time a page of medians from the buckets may take before it ends early: half the
  /// goal of a page's p99 (docs/performance.md, "Reads as a client sees them").
  public static let pageBudget: Duration = .milliseconds(250)

  /// The bucket of `cents` (0 or more).
  public static func bucket(of cents: Int64) -> Int {
    let text = String(cents)
    return text.utf8.count * 100 + Int(text.prefix(2))!
  }

  /// The smallest and the largest amount of `bucket`.
  public static func amounts(in bucket: Int) -> ClosedRange<Int64> {
    let digits = bucket / 100
    let leading = Int64(bucket % 100)
    guard digits > 2 else { return leading ... leading }
    var scale: Int64 = 1
    for _ in 0 ..< (digits - 2) { scale *= 10 }
    return (leading * scale) ... ((leading + 1) * scale - 1)
  }

  /// The bucket of the amount `column` (an integer column) in SQL, the same in SQLite and
  /// PostgreSQL once `text` casts it (`CAST(x AS TEXT)`).
  public static func sql(_ column: String) -> String {
    "(length(CAST(\(column) AS TEXT)) * 100 + CAST(substr(CAST(\(column) AS TEXT), 1, 2) AS INTEGER))"
  }

  /// The middle of a bucket histogram: for each of the one or two middle ranks of its sales
  /// (0-based, in amount order), the bucket that holds it and the rank within that bucket.
  /// Empty for an empty histogram.
  ///
  /// - Parameter counts: sale counts by bucket.
  public static func middle(of counts: [Int: Int64]) -> [(bucket: Int, offset: Int64)] {
    let total = counts.values.reduce(0, +)
    guard total > 0 else { return [] }
    let ranks = total % 2 == 1 ? [total / 2] : [total / 2 - 1, total / 2]
    var found: [(bucket: Int, offset: Int64)] = []
    var before: Int64 = 0
    for bucket in counts.keys.sorted() {
      let count = counts[bucket]!
      for rank in ranks where rank >= before && rank < before + count {
        found.append((bucket, rank - before))
      }
      before += count
      if found.count == ranks.count { break }
    }
    return found
  }
}

/// Where a page of medians from the buckets ends, by time: each median costs about the same
/// whatever its department (one bucket's amounts, read across every department), so the page
/// takes another only while its time so far, and one more median at the mean of those taken,
/// stays within `budget`; at most `limit`, and at least one.
public struct MedianPageClock: Sendable {
  public let limit: Int
  public let budget: Duration
  private let started: ContinuousClock.Instant
  /// The medians taken so far.
  public private(set) var taken = 0

  public init(
    limit: Int,
    budget: Duration = AmountBuckets.pageBudget,
    now: ContinuousClock.Instant = .now
  ) {
    self.limit = limit
    self.budget = budget
    self.started = now
  }

  /// Whether the page takes another median, at `now`; counted when it does.
  public mutating func takeAnother(now: ContinuousClock.Instant = .now) -> Bool {
    guard self.taken < self.limit else { return false }
    if self.taken > 0 {
      let elapsed = self.started.duration(to: now)
      guard elapsed + elapsed / self.taken <= self.budget else { return false }
    }
    self.taken += 1
    return true
  }

  /// The page of `groups` from `keys` (in order, fetched one past the limit): the last key
  /// taken is the next page's token when keys follow it.
  public func page(_ groups: [AggregateValue], of keys: [String]) -> AggregatePage {
    AggregatePage(groups: groups, next: keys.count > self.taken ? keys[self.taken - 1] : nil)
  }
}

/// Where a page of medians read from raw amounts ends: groups in key order with their sizes,
/// as many as `limit` allows while their sales fit in `budget`, and at least one.
public struct MedianPageEnd: Sendable {
  public let limit: Int
  public let budget: Int64
  /// The last group taken so far, and whether a group follows it that did not fit.
  public private(set) var last: String?
  public private(set) var more = false
  private var groups = 0
  private var sales: Int64 = 0

  public init(limit: Int, budget: Int64) {
    self.limit = limit
    self.budget = budget
  }

  /// Offers the next group; false once the page is full (the group is not taken).
  public mutating func take(_ key: String, size: Int64) -> Bool {
    if self.last != nil, self.groups == self.limit || self.sales + size > self.budget {
      self.more = true
      return false
    }
    self.last = key
    self.groups += 1
    self.sales += size
    return true
  }

  /// The page's last group and whether more follow; nil when no group was offered.
  public var end: (key: String, more: Bool)? { self.last.map { ($0, self.more) } }
}

/// A date range split into the pieces the bucket counts answer: whole years, whole months
/// outside them, and the days of partial months at either end.
public struct SalesPeriods: Sendable, Equatable {
  /// First and last whole year, `YYYY`.
  public var years: (first: String, last: String)?
  /// Ranges of whole months, `YYYY-MM`, at most two (before and after the whole years).
  public var months: [Bounds] = []
  /// Ranges of days, `YYYY-MM-DD`, at most two (the partial months at either end).
  public var days: [Bounds] = []

  public struct Bounds: Sendable, Equatable {
    public var first: String
    public var last: String
  }

  /// The pieces of `from...to` (inclusive `YYYY-MM-DD`; nil is open). Dates are valid
  /// (`SalesFilter.checkRange` passed).
  public init(from: String?, to: String?) {
    guard let from = CivilDate(from ?? StoreLimits.earliestSaleDate),
      let to = CivilDate(to ?? "9999-12-31"),
      from <= to
    else { return }
    let firstMonth = from.day == 1 ? from : CivilDate(dayNumber: from.lastDayOfMonth.dayNumber + 1)
    let lastMonthEnd = to == to.lastDayOfMonth ? to : CivilDate(dayNumber: to.dayNumber - to.day)
    guard firstMonth < lastMonthEnd else {
      self.days = [Bounds(first: from.text, last: to.text)]
      return
    }
    if from < firstMonth {
      self.days.append(
        Bounds(first: from.text, last: CivilDate(dayNumber: firstMonth.dayNumber - 1).text)
      )
    }
    if lastMonthEnd < to {
      self.days.append(
        Bounds(first: CivilDate(dayNumber: lastMonthEnd.dayNumber + 1).text, last: to.text)
      )
    }
    func month(_ year: Int, _ month: Int) -> String {
      String(CivilDate(year: year, month: month, day: 1)!.text.prefix(7))
    }
    let firstYear = firstMonth.month == 1 ? firstMonth.year : firstMonth.year + 1
    let lastYear = lastMonthEnd.month == 12 ? lastMonthEnd.year : lastMonthEnd.year - 1
    guard firstYear <= lastYear else {
      self.months = [
        Bounds(
          first: month(firstMonth.year, firstMonth.month),
          last: month(lastMonthEnd.year, lastMonthEnd.month)
        )
      ]
      return
    }
    self.years = (String(month(firstYear, 1).prefix(4)), String(month(lastYear, 1).prefix(4)))
    if firstMonth.year < firstYear {
      self.months.append(
        Bounds(first: month(firstMonth.year, firstMonth.month), last: month(firstMonth.year, 12))
      )
    }
    if lastMonthEnd.year > lastYear {
      self.months.append(
        Bounds(
          first: month(lastMonthEnd.year, 1),
          last: month(lastMonthEnd.year, lastMonthEnd.month)
        )
      )
    }
  }

  /// The whole years and months as ranges of the bucket table's period keys (`Y2024`,
  /// `M2024-03`, as its triggers write them): at most three ranges.
  public var bucketPeriods: [Bounds] {
    let years = self.years.map { [Bounds(first: "Y" + $0.first, last: "Y" + $0.last)] } ?? []
    return years + self.months.map { Bounds(first: "M" + $0.first, last: "M" + $0.last) }
  }

  public static func == (lhs: SalesPeriods, rhs: SalesPeriods) -> Bool {
    lhs.years?.first == rhs.years?.first && lhs.years?.last == rhs.years?.last
      && lhs.months == rhs.months && lhs.days == rhs.days
  }
}
