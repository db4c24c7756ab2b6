/// Deterministic, realistic demo employees at any scale, in the seed format.
///
/// The same `count` and `seed` always give the same records, so tests and benchmarks can
/// rebuild a dataset instead of shipping one.
internal import RosterDomain

public struct DemoData: Sequence, Sendable {
  /// How many records to make.
  public var count: Int
  /// The generator's seed.
  public var seed: UInt64

  /// Whether records name a picture from `DemoPictures`' pool (most do, some have none).
  public var pictures: Bool

  /// Creates a generator of `count` records.
  public init(count: Int, seed: UInt64 = 0x5EED, pictures: Bool = false) {
    self.count = count
    self.seed = seed
    self.pictures = pictures
  }

  /// The departments demo employees are spread across.
  public static let departments = [
    "Accounting", "Customer Success", "Design", "Engineering", "Facilities", "Finance",
    "Human Resources", "Legal", "Marketing", "Operations", "Product", "Research", "Sales",
    "Security", "Support",
  ]

  static let firstNames = [
    "José", "María", "Zoë", "François", "Søren", "Björn", "Chloé", "Renée", "Łukasz", "Ångel",
    "Çağla", "Dvořák", "Émile", "Inés", "Jürgen", "Mónica", "Nuño", "Oğuz", "Raúl", "Siân",
    "Anna", "Ben", "Carlos", "Diana", "Ethan", "Fatima", "George", "Hannah", "Ivan", "Julia",
    "Kenji", "Laura", "Mohammed", "Nina", "Oliver", "Priya", "Quentin", "Rosa", "Samuel", "Tara",
    "Umar", "Valentina", "William", "Xin", "Yusuf", "Zara", "Aiko", "Bruno", "Camille", "Dmitri",
  ]

  static let lastNames = [
    "Núñez", "García", "Müller", "Søndergaard", "Łęcki", "Öztürk", "Dubois", "Jiménez",
    "Åström", "Čapek", "Ferreira", "Gómez", "Hernández", "Ibáñez", "Kovač", "Lefèvre",
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Miller", "Davis", "Wilson", "Anderson",
    "Taylor", "Thomas", "Moore", "Martin", "Jackson", "Thompson", "White", "Harris", "Clark",
    "Lewis", "Robinson", "Walker", "Young", "Allen", "King", "Wright", "Scott", "Green", "Baker",
    "Adams", "Nelson", "Hill", "Campbell", "Mitchell", "Roberts", "Tanaka", "Nakamura", "Kim",
    "Patel", "Singh", "Chen", "Wang", "Rossi", "Bianchi", "Novak",
  ]

  static let streets = [
    "Main Street", "Oak Avenue", "Maple Drive", "Cedar Lane", "Elm Street", "Pine Road",
    "Lakeview Terrace", "Hillcrest Way", "Rue de la Paix", "Calle Mayor", "Königstraße",
  ]

  static let cities = [
    "Springfield", "Riverside", "Fairview", "Madison", "Georgetown", "Lyon", "Sevilla",
    "München", "Kraków", "Göteborg", "Porto", "Osaka",
  ]

  static let aboutPhrases = [
    "Enjoys hiking and photography on weekends.",
    "Mentors new hires and runs the book club.",
    "Previously worked in logistics for a decade.",
    "Speaks three languages and is learning a fourth.",
    "Known for excellent documentation.",
    "Plays cello in a community orchestra.",
    "Leads the office sustainability group.",
    "Has run four marathons.",
    "Likes to cook for the whole team.",
    "Collects vintage maps.",
  ]

  public func makeIterator() -> Iterator {
    Iterator(count: self.count, random: SplitMix64(seed: self.seed), pictures: self.pictures)
  }

  /// Produces the records one at a time, in constant memory.
  public struct Iterator: IteratorProtocol {
    let count: Int
    var random: SplitMix64
    let pictures: Bool
    var index = 0

    public mutating func next() -> SeedRecord? {
      guard self.index < self.count else { return nil }
      defer { self.index += 1 }
      return self.record(self.index)
    }

    private mutating func pick(_ list: [String]) -> String {
      list[Int(self.random.next() % UInt64(list.count))]
    }

    private mutating func record(_ index: Int) -> SeedRecord {
      var e = Employee()
      e.guid = self.uuid()
      let first = self.pick(DemoData.firstNames)
      let last = self.pick(DemoData.lastNames)
      e.name = "\(first) \(last)"
      e.department = self.pick(DemoData.departments)
      let local = TextFolding.fold("\(first).\(last)").filter { $0.isLetter || $0 == "." }
      e.email = "\(local)\(index)@example.com"
      e.phone = String(
        format3: Int(self.random.next() % 800) + 200,
        Int(self.random.next() % 900) + 100,
        Int(self.random.next() % 10_000)
      )
      e.address =
        "\(self.random.next() % 9000 + 100) \(self.pick(DemoData.streets)), "
        + self.pick(DemoData.cities)
      e.about = self.pick(DemoData.aboutPhrases) + " " + self.pick(DemoData.aboutPhrases)
      e.active = self.random.next() % 10 != 0
      let year = 1990 + Int(self.random.next() % 36)
      let month = 1 + Int(self.random.next() % 12)
      let day = 1 + Int(self.random.next() % 28)
      e.startDate = "\(year)-\(month < 10 ? "0" : "")\(month)-\(day < 10 ? "0" : "")\(day)"
      e.vacationDays = Int(self.random.next() % 31)
      // From the index alone, so the other fields are the same with or without pictures.
      let picture = self.pictures ? DemoPictures.fileName(forEmployee: index) : nil
      return SeedRecord(employee: e, picture: picture)
    }

    private mutating func uuid() -> String {
      let high = self.random.next()
      let low = self.random.next()
      var bytes = [UInt8](repeating: 0, count: 16)
      for i in 0 ..< 8 {
        bytes[i] = UInt8(truncatingIfNeeded: high >> (8 * UInt64(i)))
        bytes[8 + i] = UInt8(truncatingIfNeeded: low >> (8 * UInt64(i)))
      }
      bytes[6] = (bytes[6] & 0x0F) | 0x40
      bytes[8] = (bytes[8] & 0x3F) | 0x80
      let hex = bytes.map { byte -> String in
        let text = String(byte, radix: 16)
        return byte < 16 ? "0" + text : text
      }
      return hex[0 ..< 4].joined() + "-" + hex[4 ..< 6].joined() + "-" + hex[6 ..< 8].joined() + "-"
        + hex[8 ..< 10].joined() + "-" + hex[10 ..< 16].joined()
    }
  }
}

extension String {
  /// A North American style phone number, "(555) 123-4567".
  fileprivate init(format3 area: Int, _ exchange: Int, _ line: Int) {
    let padded = String(line)
    self = "(\(area)) \(exchange)-" + String(repeating: "0", count: 4 - padded.count) + padded
  }
}
