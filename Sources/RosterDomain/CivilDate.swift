/// A proleptic Gregorian calendar date with no time zone: what `YYYY-MM-DD` columns hold.
///
/// Day numbers count days since 1970-01-01 (Howard Hinnant's `days_from_civil`), so ranges of
/// dates are plain integer ranges.
public struct CivilDate: Sendable, Hashable, Comparable {
  public var year: Int
  public var month: Int
  public var day: Int

  /// A date from its parts; nil unless the day exists in that month.
  public init?(year: Int, month: Int, day: Int) {
    guard year >= 1, year <= 9999, (1 ... 12).contains(month), day >= 1,
      day <= Self.days(inMonth: month, of: year)
    else { return nil }
    self.year = year
    self.month = month
    self.day = day
  }

  /// Parses exactly `YYYY-MM-DD`; nil for any other text or a day that does not exist.
  public init?(_ text: String) {
    var text = text
    let parsed: CivilDate?? = text.withUTF8 { bytes in
      guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else {
        return nil
      }
      func number(_ range: Range<Int>) -> Int? {
        var value = 0
        for index in range {
          let digit = Int(bytes[index]) - 48
          guard (0 ... 9).contains(digit) else { return nil }
          value = value * 10 + digit
        }
        return value
      }
      guard let year = number(0 ..< 4), let month = number(5 ..< 7), let day = number(8 ..< 10)
      else {
        return nil
      }
      return CivilDate(year: year, month: month, day: day)
    }
    guard let date = parsed ?? nil else { return nil }
    self = date
  }

  /// The date `dayNumber` days after 1970-01-01.
  public init(dayNumber: Int) {
    let z = dayNumber + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    self.day = doy - (153 * mp + 2) / 5 + 1
    self.month = mp < 10 ? mp + 3 : mp - 9
    self.year = yoe + era * 400 + (self.month <= 2 ? 1 : 0)
  }

  /// Days since 1970-01-01 (negative before it).
  public var dayNumber: Int {
    let y = self.month <= 2 ? self.year - 1 : self.year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = self.month > 2 ? self.month - 3 : self.month + 9
    let doy = (153 * mp + 2) / 5 + self.day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
  }

  /// The last day of this date's month.
  public var lastDayOfMonth: CivilDate {
    var last = self
    last.day = Self.days(inMonth: self.month, of: self.year)
    return last
  }

  /// `YYYY-MM-DD`.
  public var text: String {
    Self.pad(self.year, 4) + "-" + Self.pad(self.month, 2) + "-" + Self.pad(self.day, 2)
  }

  /// How many days `month` (1–12) has in `year`.
  public static func days(inMonth month: Int, of year: Int) -> Int {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
  }

  public static func < (lhs: CivilDate, rhs: CivilDate) -> Bool {
    (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
  }

  private static func pad(_ value: Int, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width
      ? digits : String(repeating: "0", count: width - digits.count) + digits
  }
}
