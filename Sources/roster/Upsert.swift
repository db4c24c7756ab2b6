import ArgumentParser
import Foundation
import GRPCCore
import RosterDomain
import RosterProto
import RosterSQLite
import RosterSeed
import RosterServices

/// `roster upsert`: streams a seed.json file to a running server's UpsertEmployees.
struct Upsert: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Stream a seed.json file to a server (UpsertEmployees), merging by guid."
  )

  @OptionGroup var client: ClientOptions

  @Argument(help: "The seed.json file to send.")
  var file: String

  @Option(help: "Employees per stream message.")
  var rowsPerMessage: Int = 500

  @Option(help: "The author recorded in the change log (x-roster-author).")
  var author: String = "roster-upsert"

  func validate() throws {
    if self.rowsPerMessage < 1 { throw ValidationError("--rows-per-message must be at least 1") }
  }

  func run() async throws {
    let started = ContinuousClock.now
    let batches = try SeedFile.batches(self.file, size: self.rowsPerMessage)
    let response = try await self.client.withClient { client in
      try await Roster_V1_Directory.Client(wrapping: client).upsertEmployees(
        metadata: [AuthorInterceptor.metadataKey: .string(self.author)],
        options: self.client.callOptions
      ) { writer in
        for try await rows in batches {
          try await writer.write(.with { $0.employees = rows.map(Self.message) })
        }
      }
    }
    let seconds = (ContinuousClock.now - started).seconds
    let rows = response.inserted + response.updated
    if self.client.json {
      print(try response.jsonString())
      return
    }
    print(
      "upserted \(rows) employees in \(String(format: "%.2f", seconds)) s "
        + "(\(Int(Double(rows) / max(seconds, 1e-9))) rows/s), inserted \(response.inserted), "
        + "updated \(response.updated), rejected \(response.rejectedCount)"
    )
    for rejection in response.rejected.prefix(20) {
      print("  record \(rejection.index): \(rejection.reason)")
    }
  }

  /// The proto row for a seed row: every field the row sets.
  static func message(_ row: UpsertRow) -> Roster_V1_Employee {
    let changes = row.changes
    var employee = Roster_V1_Employee()
    employee.guid = row.guid
    if let name = changes.name { employee.name = name }
    if let department = changes.department { employee.department = department }
    if let email = changes.email { employee.email = email }
    if let phone = changes.phone { employee.phone = phone }
    if let address = changes.address { employee.address = address }
    if let about = changes.about { employee.about = about }
    if let active = changes.active { employee.active = active }
    if let startDate = changes.startDate { employee.startDate = startDate }
    if let vacationDays = changes.vacationDays { employee.vacationDays = Int32(vacationDays) }
    return employee
  }
}
