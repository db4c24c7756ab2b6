internal import GRPCCore
internal import GRPCNIOTransportHTTP2
internal import GRPCProtobuf
internal import RosterDomain
internal import RosterLocks
internal import RosterProto
internal import SwiftProtobuf
internal import Synchronization

/// One connection: grpc-swift's client, and the lean unary path beside it when in use.
struct Connection: Sendable {
  let client: GRPCClient<HTTP2ClientTransport.Posix>
  let directory: Roster_V1_Directory.Client<HTTP2ClientTransport.Posix>
  let pictures: Roster_V1_Pictures.Client<HTTP2ClientTransport.Posix>
  /// Unary calls go here when set.
  let unary: UnaryConnection?

  init(_ client: GRPCClient<HTTP2ClientTransport.Posix>, unary: UnaryConnection?) {
    self.client = client
    self.directory = Roster_V1_Directory.Client(wrapping: client)
    self.pictures = Roster_V1_Pictures.Client(wrapping: client)
    self.unary = unary
  }
}

/// What the load sends, drawn from data discovered on the live service.
///
/// Discovery streams the directory once (guid, name, department and `has_picture` only) and
/// keeps a uniform sample, so `roster load` needs nothing but an address.
final class Workload: Sendable {
  let guids: [String]
  let pictureGuids: [String]
  let departments: [String]
  let searchTerms: [String]
  /// Employees seen by discovery, whether sampled or not.
  let employeesSeen: Int
  private let configuration: LoadConfiguration
  private let readMask: Google_Protobuf_FieldMask?
  /// Page tokens left by earlier `list` requests, so that later ones continue the listing.
  private let listCursors = Locked<[ListCursor]>([])
  private let created = Atomic<Int>(0)

  private struct ListCursor {
    var department: String
    var token: String
  }

  init(
    guids: [String],
    pictureGuids: [String],
    departments: [String],
    names: [String],
    employeesSeen: Int,
    configuration: LoadConfiguration
  ) {
    self.guids = guids
    self.pictureGuids = pictureGuids
    self.departments = departments.sorted()
    self.searchTerms = Self.searchTerms(from: names)
    self.employeesSeen = employeesSeen
    self.configuration = configuration
    self.readMask =
      configuration.readMask.isEmpty ? nil : .with { $0.paths = configuration.readMask }
  }

  /// Streams the directory once and samples what the mix needs.
  ///
  /// - Throws: `LoadError` when a scenario in the mix has nothing to work on, such as `picture`
  ///   against a directory with no pictures.
  static func discover(
    on connection: Connection,
    configuration: LoadConfiguration
  ) async throws -> Workload {
    let limit = configuration.discoverLimit
    let request = Roster_V1_ListEmployeesRequest.with {
      $0.pageSize = 1_000
      $0.readMask = .with { $0.paths = ["guid", "name", "department", "has_picture"] }
    }
    struct Sample: Sendable {
      var seen = 0
      var picturesSeen = 0
      var people: [(guid: String, name: String)] = []
      var pictures: [String] = []
      var departments: Set<String> = []
    }
    let seed = configuration.seed
    let sample = try await connection.directory.streamEmployees(
      request,
      metadata: configuration.metadata,
      options: configuration.callOptions.withoutTimeout
    ) { response in
      var random = SplitMix64(seed: seed ^ 0xD15C_0BE5)
      var sample = Sample()
      for try await page in response.messages {
        for employee in page.employees {
          // Reservoir sampling (Algorithm R): every employee is kept with equal probability.
          sample.seen += 1
          sample.departments.insert(employee.department)
          if sample.people.count < limit {
            sample.people.append((employee.guid, employee.name))
          } else {
            let slot = Int(random.next() % UInt64(sample.seen))
            if slot < limit { sample.people[slot] = (employee.guid, employee.name) }
          }
          guard employee.hasPicture_p else { continue }
          sample.picturesSeen += 1
          if sample.pictures.count < limit {
            sample.pictures.append(employee.guid)
          } else {
            let slot = Int(random.next() % UInt64(sample.picturesSeen))
            if slot < limit { sample.pictures[slot] = employee.guid }
          }
        }
      }
      return sample
    }
    let workload = Workload(
      guids: sample.people.map(\.guid),
      pictureGuids: sample.pictures,
      departments: Array(sample.departments),
      names: sample.people.map(\.name),
      employeesSeen: sample.seen,
      configuration: configuration
    )
    try workload.checkCoverage(of: configuration.mix)
    return workload
  }

  /// Sends one request of `scenario` and returns how many items (rows or bytes) it carried.
  func perform(
    _ scenario: Scenario,
    on connection: Connection,
    random: inout SplitMix64
  ) async throws -> Int {
    let metadata = self.configuration.metadata
    let options = self.configuration.callOptions
    switch scenario {
    case .get:
      let request = Roster_V1_GetEmployeeRequest.with {
        $0.guid = self.guids[random.index(self.guids.count)]
        if let mask = self.readMask { $0.readMask = mask }
      }
      let _: Roster_V1_Employee = try await self.unary(
        Roster_V1_Directory.Method.GetEmployee.descriptor,
        request,
        on: connection
      )
      return 1

    case .list:
      var request = self.listRequest()
      let resumed = random.next() % 2 == 0 ? self.listCursors.withLock { $0.popLast() } : nil
      if let resumed {
        request.department = resumed.department
        request.pageToken = resumed.token
      } else if random.next() % 2 == 0, !self.departments.isEmpty {
        request.department = self.departments[random.index(self.departments.count)]
      }
      let page: Roster_V1_ListEmployeesResponse = try await self.unary(
        Roster_V1_Directory.Method.ListEmployees.descriptor,
        request,
        on: connection
      )
      if !page.nextPageToken.isEmpty {
        let cursor = ListCursor(department: request.department, token: page.nextPageToken)
        self.listCursors.withLock { cursors in
          if cursors.count < 256 { cursors.append(cursor) }
        }
      }
      return page.employees.count

    case .stream:
      var request = self.listRequest()
      if random.next() % 2 == 0, !self.departments.isEmpty {
        request.department = self.departments[random.index(self.departments.count)]
      }
      let pages = self.configuration.streamPages
      return try await connection.directory.streamEmployees(
        request,
        metadata: metadata,
        options: options
      ) { response in
        var rows = 0
        var read = 0
        for try await page in response.messages {
          rows += page.employees.count
          read += 1
          if read >= pages { break }  // Leaving early cancels the stream: the server stops reading.
        }
        return rows
      }

    case .search:
      var request = self.listRequest()
      request.nameContains = self.searchTerms[random.index(self.searchTerms.count)]
      let page: Roster_V1_ListEmployeesResponse = try await self.unary(
        Roster_V1_Directory.Method.ListEmployees.descriptor,
        request,
        on: connection
      )
      return page.employees.count

    case .picture:
      let request = Roster_V1_GetPictureRequest.with {
        $0.guid = self.pictureGuids[random.index(self.pictureGuids.count)]
      }
      return try await connection.pictures.getPicture(request, metadata: metadata, options: options)
      {
        response in
        var bytes = 0
        for try await chunk in response.messages { bytes += chunk.data.count }
        return bytes
      }

    case .thumbnail:
      let request = Roster_V1_GetThumbnailRequest.with {
        $0.guid = self.pictureGuids[random.index(self.pictureGuids.count)]
      }
      let thumbnail: Roster_V1_GetThumbnailResponse = try await self.unary(
        Roster_V1_Pictures.Method.GetThumbnail.descriptor,
        request,
        on: connection
      )
      return thumbnail.data.count

    case .analytics:
      return try await self.analytics(on: connection, random: &random)

    case .write:
      if random.next() % 5 == 0 {
        let number = self.created.add(1, ordering: .relaxed).newValue
        let request = Roster_V1_CreateEmployeeRequest.with {
          $0.employee = .with {
            $0.name = "Load Tester \(number)"
            $0.department =
              self.departments.isEmpty
              ? "Load" : self.departments[random.index(self.departments.count)]
            $0.email = "load.tester.\(number)@example.invalid"
            $0.active = true
            $0.startDate = "2024-01-02"
            $0.vacationDays = 10
          }
        }
        let _: Roster_V1_Employee = try await self.unary(
          Roster_V1_Directory.Method.CreateEmployee.descriptor,
          request,
          on: connection
        )
      } else {
        let request = Roster_V1_UpdateEmployeeRequest.with {
          $0.employee = .with {
            $0.guid = self.guids[random.index(self.guids.count)]
            $0.vacationDays = Int32(random.index(31))
          }
          $0.updateMask = .with { $0.paths = ["vacation_days"] }
        }
        let _: Roster_V1_Employee = try await self.unary(
          Roster_V1_Directory.Method.UpdateEmployee.descriptor,
          request,
          on: connection
        )
      }
      return 1
    }
  }

  // MARK: - Private

  private func listRequest() -> Roster_V1_ListEmployeesRequest {
    var request = Roster_V1_ListEmployeesRequest()
    request.pageSize = Int32(self.configuration.pageSize)
    if let mask = self.readMask { request.readMask = mask }
    return request
  }

  /// One of the Analytics reads, chosen at random: each family of the service gets its share.
  private func analytics(on connection: Connection, random: inout SplitMix64) async throws -> Int {
    let department =
      self.departments.isEmpty ? "" : self.departments[random.index(self.departments.count)]
    let guid = self.guids[random.index(self.guids.count)]
    typealias Method = Roster_V1_Analytics.Method
    switch random.index(5) {
    case 0:
      let response: Roster_V1_DepartmentHeadcountsResponse = try await self.unary(
        Method.DepartmentHeadcounts.descriptor,
        Roster_V1_DepartmentHeadcountsRequest(),
        on: connection
      )
      return response.departments.count
    case 1:
      let _: Roster_V1_DepartmentSummaryResponse = try await self.unary(
        Method.DepartmentSummary.descriptor,
        Roster_V1_DepartmentSummaryRequest.with { $0.department = department },
        on: connection
      )
      return 1
    case 2:
      let _: Roster_V1_EmployeeSalesResponse = try await self.unary(
        Method.EmployeeSales.descriptor,
        Roster_V1_EmployeeSalesRequest.with { $0.guid = guid },
        on: connection
      )
      return 1
    case 3:
      let response: Roster_V1_SalesCalendarResponse = try await self.unary(
        Method.SalesCalendar.descriptor,
        Roster_V1_SalesCalendarRequest.with { $0.department = department },
        on: connection
      )
      return response.years.count
    default:
      let response: Roster_V1_SalesCalendarResponse = try await self.unary(
        Method.SalesCalendar.descriptor,
        Roster_V1_SalesCalendarRequest.with { $0.employeeGuid = guid },
        on: connection
      )
      return response.years.count
    }
  }

  /// One unary call: over the lean path when the connection has one, else through grpc-swift.
  private func unary<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
    _ descriptor: MethodDescriptor,
    _ request: Request,
    on connection: Connection
  ) async throws -> Response {
    if let lean = connection.unary {
      let bytes = try await lean.call(
        path: "/" + descriptor.fullyQualifiedMethod,
        message: try request.serializedBytes(),
        timeout: self.configuration.callOptions.timeout
      )
      return try Response(serializedBytes: bytes)
    }
    return try await connection.client.unary(
      request: ClientRequest(message: request, metadata: self.configuration.metadata),
      descriptor: descriptor,
      serializer: ProtobufSerializer<Request>(),
      deserializer: ProtobufDeserializer<Response>(),
      options: self.configuration.callOptions
    ) { try $0.message }
  }

  private func checkCoverage(of mix: Mix) throws {
    for scenario in mix.scenarios {
      switch scenario {
      case .get, .list, .stream, .search, .analytics, .write:
        if self.guids.isEmpty {
          throw LoadError(
            "the directory has no employees, so '\(scenario.rawValue)' has nothing to read; "
              + "seed it first (roster serve seeds demo data on first start)"
          )
        }
      case .picture, .thumbnail:
        if self.pictureGuids.isEmpty {
          throw LoadError(
            "no employee has a picture, so '\(scenario.rawValue)' has nothing to fetch; "
              + "upload some (PutPicture) or drop it from --mix"
          )
        }
      }
    }
  }

  /// Search terms a person would type: the first three to five letters of a real name's parts.
  private static func searchTerms(from names: [String]) -> [String] {
    var terms: [String] = []
    for (index, name) in names.enumerated() {
      let parts = name.split(separator: " ").filter { $0.count >= 3 }
      guard !parts.isEmpty else { continue }
      let part = parts[index % parts.count]
      terms.append(String(part.prefix(3 + index % 3)).lowercased())
    }
    return terms.isEmpty ? ["a"] : terms
  }
}

extension CallOptions {
  /// These options with no deadline: discovery of a large directory outlasts a per-call one.
  var withoutTimeout: CallOptions {
    var options = self
    options.timeout = nil
    return options
  }
}
