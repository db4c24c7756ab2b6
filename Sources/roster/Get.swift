import ArgumentParser
import GRPCCore
import RosterProto
import SwiftProtobuf

/// `roster get`: one employee by guid, as a table or JSON.
struct Get: AsyncParsableCommand {
  static let configuration = CommandConfiguration(abstract: "Get employees by guid.")

  @OptionGroup var client: ClientOptions

  @Argument(help: "One or more employee guids.")
  var guids: [String]

  func run() async throws {
    let employees = try await self.client.withClient { client in
      let directory = Roster_V1_Directory.Client(wrapping: client)
      if self.guids.count == 1 {
        return [
          try await directory.getEmployee(
            .with { $0.guid = self.guids[0] },
            options: self.client.callOptions
          )
        ]
      }
      return try await directory.batchGetEmployees(
        .with { $0.guids = self.guids },
        options: self.client.callOptions
      ).employees
    }
    if self.client.json {
      for employee in employees { print(try employee.jsonString()) }
    } else {
      print(EmployeeTable.render(employees, detailed: true))
    }
  }
}
