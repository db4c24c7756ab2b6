import ArgumentParser
import GRPCCore
import RosterProto
import SwiftProtobuf

/// `roster list`: one page of employees, as a table or JSON.
struct List: AsyncParsableCommand {
  static let configuration = CommandConfiguration(abstract: "List a page of employees.")

  @OptionGroup var client: ClientOptions

  @Option(help: "Employees per page (default 50, at most 1000).")
  var pageSize: Int32 = 20

  @Option(help: "A next_page_token from an earlier call.")
  var pageToken: String = ""

  @Option(help: "Only this department.")
  var department: String = ""

  @Option(help: "Only active (true) or inactive (false) employees.")
  var active: Bool?

  @Option(help: "Only names containing this text (ignores case and accents).")
  var nameContains: String = ""

  @Option(help: "Order: name, start_date or department.")
  var orderBy: String = "name"

  @Option(help: "Comma-separated Employee fields to read, e.g. guid,name,department.")
  var fields: String = ""

  func validate() throws {
    guard ["name", "start_date", "department"].contains(self.orderBy) else {
      throw ValidationError("--order-by must be name, start_date or department")
    }
  }

  func run() async throws {
    var request = Roster_V1_ListEmployeesRequest()
    request.pageSize = self.pageSize
    request.pageToken = self.pageToken
    request.department = self.department
    if let active = self.active { request.active = active }
    request.nameContains = self.nameContains
    request.orderBy =
      switch self.orderBy {
      case "start_date": .startDate
      case "department": .department
      default: .name
      }
    if !self.fields.isEmpty {
      request.readMask = Google_Protobuf_FieldMask(
        protoPaths: self.fields.split(separator: ",").map(String.init)
      )
    }
    let response = try await self.client.withClient { client in
      try await Roster_V1_Directory.Client(wrapping: client).listEmployees(
        request,
        options: self.client.callOptions
      )
    }
    if self.client.json {
      print(try response.jsonString())
    } else {
      print(EmployeeTable.render(response.employees))
      if !response.nextPageToken.isEmpty {
        print("next page: --page-token \(response.nextPageToken)")
      }
    }
  }
}
