import Foundation
import RosterDomain
import Testing

/// The domain's hand-written arithmetic checked against an independent answer on many inputs:
/// Foundation's Gregorian calendar and UUID parser, a sorted list, a set of days.
@Suite("Domain arithmetic against oracles")
struct DomainOracleTests {
  static let calendar: Calendar = {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar
  }()

  /// Foundation's day number of `date`: days since 1970-01-01 in UTC.
  static func foundationDayNumber(_ date: CivilDate) -> Int {
    let components = DateComponents(year: date.year, month: date.month, day: date.day)
    let instant = Self.calendar.date(from: components)!
    return Int((instant.timeIntervalSince1970 / 86_400).rounded(.down))
  }

  @Test("day numbers match Foundation's Gregorian calendar, and convert back, on random dates")
  func dayNumbers() {
    var random = SplitMix64(seed: 0xDA7E)
    // Every day of the years the data lives in, and random days from year 1 to 9999.
    let start = CivilDate("1899-12-01")!.dayNumber
    let everyDay = start ..< start + 366 * 130
    let randomDays = (0 ..< 20_000).map { _ in
      Int.random(
        in: CivilDate("0001-01-01")!.dayNumber ... CivilDate("9999-12-31")!.dayNumber,
        using: &random
      )
    }
    for number in Array(everyDay) + randomDays {
      let date = CivilDate(dayNumber: number)
      #expect(date.dayNumber == number)
      #expect(CivilDate(year: date.year, month: date.month, day: date.day) == date)
      #expect(CivilDate(date.text) == date, "\(date.text)")
      if date.year >= 1600 {
        // Foundation's Gregorian calendar switches to the Julian one before 1582.
        #expect(Self.foundationDayNumber(date) == number, "\(date.text)")
      }
    }
  }

  @Test(
    "only real dates written exactly YYYY-MM-DD parse",
    arguments: [
      ("2024-02-29", true), ("2023-02-29", false), ("1900-02-29", false), ("2000-02-29", true),
      ("2024-04-31", false), ("2024-13-01", false), ("2024-00-10", false), ("2024-01-00", false),
      ("0000-01-01", false), ("2024-1-01", false), (" 2024-01-01", false), ("2024-01-01 ", false),
      ("2024/01/01", false), ("２０２４-01-01", false), ("+024-01-01", false), ("", false),
    ]
  )
  func parsing(text: String, valid: Bool) {
    #expect((CivilDate(text) != nil) == valid)
    #expect(EmployeeValidation.isValidDate(text) == valid)
    if valid { #expect(CivilDate(text)!.text == text) }
  }

  @Test("a range's years, months and days cover each of its days exactly once")
  func salesPeriodsCoverTheRange() {
    var random = SplitMix64(seed: 0x5A1E5)
    let low = CivilDate("1998-01-01")!.dayNumber
    let high = CivilDate("2026-12-31")!.dayNumber
    for round in 0 ..< 1_500 {
      let a = Int.random(in: low ... high, using: &random)
      // Short ranges as often as long ones: within a month, across a year, across decades.
      let span = [3, 40, 400, 4000][round % 4]
      let b = min(high, a + Int.random(in: 0 ... span, using: &random))
      let from = CivilDate(dayNumber: a)
      let to = CivilDate(dayNumber: b)
      let periods = SalesPeriods(from: from.text, to: to.text)
      var covered: [Int] = []
      if let years = periods.years {
        covered +=
          CivilDate("\(years.first)-01-01")!.dayNumber
          ... CivilDate("\(years.last)-12-31")!.dayNumber
      }
      for months in periods.months {
        let first = CivilDate(months.first + "-01")!
        let last = CivilDate(months.last + "-01")!.lastDayOfMonth
        covered += first.dayNumber ... last.dayNumber
      }
      for days in periods.days {
        covered += CivilDate(days.first)!.dayNumber ... CivilDate(days.last)!.dayNumber
      }
      #expect(covered.sorted() == Array(a ... b), "\(from.text)...\(to.text)")
      #expect(periods.months.count <= 2 && periods.days.count <= 2)
    }
    let backwards = SalesPeriods(from: "2024-02-01", to: "2024-01-31")
    #expect(backwards.years == nil && backwards.months.isEmpty && backwards.days.isEmpty)
  }

  @Test("an amount lies in its bucket, and buckets sort as amounts do")
  func amountBuckets() {
    var random = SplitMix64(seed: 0xB0C4)
    var amounts: [Int64] = Array(0 ... 1_200)
    for _ in 0 ..< 20_000 {
      let digits = Int.random(in: 1 ... 12, using: &random)
      amounts.append(Int64.random(in: 0 ..< Int64(pow(10, Double(digits))), using: &random))
    }
    amounts.sort()
    var previous = -1
    for cents in amounts {
      let bucket = AmountBuckets.bucket(of: cents)
      #expect(AmountBuckets.amounts(in: bucket).contains(cents), "\(cents) in \(bucket)")
      #expect(bucket >= previous, "\(cents)")
      previous = bucket
    }
  }

  @Test("the middle of a bucket histogram is the median's rank in the sorted amounts")
  func bucketMiddle() {
    var random = SplitMix64(seed: 0x3ED1A)
    for _ in 0 ..< 2_000 {
      var counts: [Int: Int64] = [:]
      for _ in 0 ..< Int.random(in: 0 ... 6, using: &random) {
        counts[Int.random(in: 100 ... 1299, using: &random), default: 0] +=
          Int64.random(in: 1 ... 5, using: &random)
      }
      // Every sale listed as (bucket, rank within its bucket), in amount order.
      let sales = counts.keys.sorted().flatMap { bucket in
        (0 ..< counts[bucket]!).map { (bucket: bucket, offset: $0) }
      }
      let middle = AmountBuckets.middle(of: counts)
      if sales.isEmpty {
        #expect(middle.isEmpty)
        continue
      }
      let ranks = sales.count % 2 == 1 ? [sales.count / 2] : [sales.count / 2 - 1, sales.count / 2]
      #expect(middle.map(\.bucket) == ranks.map { sales[$0].bucket })
      #expect(middle.map(\.offset) == ranks.map { sales[$0].offset })
    }
  }

  /// RFC 9562's text form of a UUID: 8-4-4-4-12 hex digits, either case. (Foundation's
  /// `UUID(uuidString:)` on Linux is no oracle for this: it reads each byte with `sscanf`'s
  /// `%2hhx`, which also takes a space or a sign where a digit belongs.)
  static let uuidGrammar = try! NSRegularExpression(
    pattern: "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
  )

  @Test("a guid is taken exactly when it matches RFC 9562's grammar, in lower case")
  func guids() {
    var random = SplitMix64(seed: 0x6D1D)
    let alphabet = Array("0123456789abcdefABCDEF-gxz {}")
    for round in 0 ..< 20_000 {
      let uuid = UUID()
      var text = round % 3 == 0 ? uuid.uuidString.lowercased() : uuid.uuidString
      if round % 2 == 1 {
        // One to three characters replaced, inserted or removed.
        var characters = Array(text)
        for _ in 0 ..< Int.random(in: 1 ... 3, using: &random) {
          let index = Int.random(in: 0 ..< characters.count, using: &random)
          let character = alphabet.randomElement(using: &random)!
          switch Int.random(in: 0 ..< 3, using: &random) {
          case 0: characters[index] = character
          case 1: characters.insert(character, at: index)
          default: characters.remove(at: index)
          }
        }
        text = String(characters)
      }
      let ours = EmployeeValidation.canonicalGUID(text)
      let range = NSRange(text.startIndex..., in: text)
      let matches = Self.uuidGrammar.firstMatch(in: text, range: range) != nil
      #expect(ours == (matches ? text.lowercased() : nil), "\(text)")
      if matches { #expect(ours == UUID(uuidString: text)?.uuidString.lowercased()) }
    }
    #expect(throws: StoreError.self) { try EmployeeValidation.requireGUID("") }
    #expect(throws: StoreError.self) { try EmployeeValidation.requireGUID("not-a-uuid") }
  }

  @Test("folding lowers case and removes diacritics, and folding twice changes nothing")
  func folding() {
    #expect(TextFolding.fold("José Núñez") == "jose nunez")
    #expect(TextFolding.fold("Søren Łukasz Æsir STRAßE") == "soren lukasz aesir strasse")
    #expect(TextFolding.fold("ÅNGSTRÖM") == "angstrom")
    var random = SplitMix64(seed: 0xF01D)
    let pool = Array("aAzZ éÉñÑøØłŁæÆßœŒıİöÖüÜçÇ日本-'.")
    for _ in 0 ..< 5_000 {
      let text = String(
        (0 ..< Int.random(in: 0 ... 12, using: &random)).map { _ in
          pool.randomElement(using: &random)!
        }
      )
      let folded = TextFolding.fold(text)
      #expect(TextFolding.fold(folded) == folded, "\(text)")
      #expect(folded == folded.lowercased(), "\(text)")
      if text.utf8.allSatisfy({ $0 < 0x80 }) { #expect(folded == text.lowercased()) }
    }
  }
}
