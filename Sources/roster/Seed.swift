import ArgumentParser
import RosterDomain
import RosterSQLite
import RosterSeed

/// `roster seed`: writes deterministic demo employees in the sample's seed.json shape.
struct Seed: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Write deterministic demo employees as seed.json."
  )

  @Option(help: "How many employees to write (50 to 1,000,000 or more).")
  var employees: Int = 1000

  @Option(help: "The JSON file to write.")
  var out: String = "seed.json"

  @Option(help: "Seed of the generator; the same seed gives the same file.")
  var seed: UInt64 = 0x5EED

  @Option(help: "Where the demo pictures go (default: a pictures directory beside --out).")
  var picturesDir: String?

  @Flag(inversion: .prefixedNo, help: "Give most employees a synthetic JPEG picture.")
  var pictures = true

  @Option(help: "Mean sales per employee (each gets half to one and a half times it); 0 for none.")
  var salesPerEmployee: Int = 20

  @Option(help: "Where the sales go (default: sales.csv beside --out).")
  var salesOut: String?

  func validate() throws {
    guard self.employees >= 0 else { throw ValidationError("--employees must not be negative") }
    guard self.salesPerEmployee >= 0 else {
      throw ValidationError("--sales-per-employee must not be negative")
    }
  }

  func run() throws {
    let started = ContinuousClock.now
    let data = DemoData(count: self.employees, seed: self.seed, pictures: self.pictures)
    let employeeMeter = ProgressMeter(
      "employees",
      total: Int64(self.employees),
      output: .standardError
    )
    try SeedFile.write(
      data.lazy.map {
        employeeMeter.advance(by: 1)
        return $0
      },
      to: self.out
    )
    employeeMeter.finish()
    print("wrote \(self.employees) employees to \(self.out) in \(ContinuousClock.now - started)")
    if self.pictures {
      let directory = self.picturesDir ?? SeedFile.picturesDirectory(beside: self.out)
      let written = try DemoPictures.writePool(to: directory)
      print("wrote \(written) demo pictures to \(directory)")
    }
    if self.salesPerEmployee > 0 {
      let salesStarted = ContinuousClock.now
      let path = self.salesOut ?? SalesFile.path(beside: self.out)
      let salesMeter = ProgressMeter("sales", output: .standardError)
      let written = try SalesFile.write(
        DemoSales(employees: data, perEmployee: self.salesPerEmployee).lazy.map {
          salesMeter.advance(by: 1)
          return $0
        },
        to: path
      )
      salesMeter.finish()
      print("wrote \(written) sales to \(path) in \(ContinuousClock.now - salesStarted)")
    }
  }
}
