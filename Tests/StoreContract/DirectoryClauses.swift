internal import Foundation
internal import RosterDomain
internal import RosterStore

/// The directory's clauses: reads, pages, filters and writes.
extension StoreContract {
  static func createAndRead(_ store: Store) async throws {
    let asked = Self.person("José Núñez")
    let made = try await store.createEmployee(asked, context: Self.writer)
    try Self.require(made.guid == asked.guid, "the guid is kept: \(made.guid)")
    let read = try await store.employee(guid: made.guid, fields: .all)
    for (field, same) in [
      ("name", read.name == "José Núñez"), ("department", read.department == "Sales"),
      ("start_date", read.startDate == "2020-01-01"), ("active", read.active),
      ("vacation_days", read.vacationDays == 10), ("email", read.email == made.email),
    ] {
      try Self.require(same, "\(field) read back differs: \(read)")
    }
    let masked = try await store.employee(guid: made.guid, fields: [.guid, .name])
    try Self.require(
      masked.name == "José Núñez" && masked.department.isEmpty,
      "a read mask reads only its fields: \(masked)"
    )
    try await Self.requireError(
      .notFound,
      naming: "00000000-0000-4000-8000-000000000000",
      "an unknown guid"
    ) {
      _ = try await store.employee(guid: "00000000-0000-4000-8000-000000000000", fields: .all)
    }
  }

  static func refusalsChangeNothing(_ store: Store) async throws {
    let made = try await store.createEmployee(Self.person("Ada Lovelace"), context: Self.writer)
    let before = try await store.latestChange
    try await Self.requireError(.alreadyExists, naming: made.guid, "a taken guid") {
      var again = Self.person("Someone Else")
      again.guid = made.guid
      _ = try await store.createEmployee(again, context: Self.writer)
    }
    try await Self.requireError(.invalidArgument, naming: "name", "an empty name") {
      _ = try await store.createEmployee(Self.person(""), context: Self.writer)
    }
    try await Self.requireError(
      .invalidArgument,
      naming: "start_date",
      "a date that does not exist"
    ) {
      _ = try await store.createEmployee(
        Self.person("Grace Hopper", start: "2023-02-30"),
        context: Self.writer
      )
    }
    try await Self.requireError(.invalidArgument, naming: "vacation_days", "negative vacation days")
    {
      var changes = EmployeeChanges()
      changes.vacationDays = -1
      _ = try await store.updateEmployee(guid: made.guid, changes: changes, context: Self.writer)
    }
    let after = try await store.employee(guid: made.guid, fields: .all)
    try Self.require(
      after.name == "Ada Lovelace" && after.vacationDays == 10,
      "a refused write changed the row: \(after)"
    )
    try Self.require(
      try await store.countEmployees(filter: EmployeeFilter()) == 1,
      "a refused create left a row"
    )
    try Self.require(store.latestChange == before, "a refused write logged a change")
  }

  static func batchReadKeepsOrder(_ store: Store) async throws {
    let made = try await Self.create(store, Array(Self.names.prefix(5)))
    let guids = [made[3].guid, made[0].guid, made[4].guid]
    let read = try await store.employees(guids: guids, fields: [.guid, .name])
    try Self.require(read.map(\.guid) == guids, "a batch read answers in the order asked")
    let unknown = "00000000-0000-4000-8000-0000000000aa"
    try await Self.requireError(.notFound, naming: unknown, "a batch with an unknown guid") {
      _ = try await store.employees(guids: [made[1].guid, unknown], fields: .all)
    }
  }

  static func pagesCoverEveryRowOnceInOrder(_ store: Store) async throws {
    let made = try await Self.create(store, Self.names)
    for order in EmployeeOrder.allCases {
      for size in [1, 4, 50] {
        let walked = try await Self.walk(store, order: order, size: size)
        try Self.require(
          walked.map(\.guid).sorted() == made.map(\.guid).sorted(),
          "\(order) in pages of \(size) did not hold every employee exactly once"
        )
        let whole = try await Self.walk(store, order: order, size: StoreLimits.maximumPageSize)
        try Self.require(
          walked.map(\.guid) == whole.map(\.guid),
          "\(order) pages of \(size) differ from one page"
        )
        let keys: [String] = walked.map {
          switch order {
          case .startDate: $0.startDate
          case .department: $0.department + "\u{0}" + TextFolding.fold($0.name)
          default: TextFolding.fold($0.name)
          }
        }
        try Self.require(keys == keys.sorted(), "\(order) is not in order: \(keys)")
        // Several pages from one read are the pages one read each gives, cursors included.
        let single = try await Self.pages(store, order: order, size: size, count: 1)
        for count in [2, 3, 7] {
          let together = try await Self.pages(store, order: order, size: size, count: count)
          try Self.require(
            together == single,
            "\(order): pages of \(size) read \(count) at once differ from one at a time"
          )
        }
        let searched = try await Self.pages(
          store,
          order: order,
          filter: EmployeeFilter(nameContains: "a"),
          size: size,
          count: 3
        )
        let searchedSingly = try await Self.pages(
          store,
          order: order,
          filter: EmployeeFilter(nameContains: "a"),
          size: size,
          count: 1
        )
        try Self.require(
          searched == searchedSingly,
          "\(order): a name search's pages read 3 at once differ"
        )
      }
    }
  }

  /// `writtenEmployeePages` hands each row to the writer as `employeePages` reads it: the same
  /// pages, rows and cursors, for every field set, with and without pictures and filters.
  static func writtenPagesAreReadPages(_ store: Store, _ fixtures: Fixtures) async throws {
    let made = try await Self.create(store, Self.names)
    for employee in made.prefix(3) {
      let upload = try await store.beginPictureUpload(
        guid: employee.guid,
        contentType: "image/jpeg",
        totalSize: Int64(fixtures.jpeg.count)
      )
      try await upload.append(fixtures.jpeg[...])
      _ = try await upload.finish(context: Self.writer)
    }
    let writer = DescribingWriter()
    let fieldSets: [EmployeeFields] = [
      .all, .allButThumbnail, [.name], [.thumbnail, .pictureEtag],
      [.guid, .about, .updateTime, .salesCount],
    ]
    let filters = [
      EmployeeFilter(), EmployeeFilter(nameContains: "a"), EmployeeFilter(department: "Nowhere"),
    ]
    for fields in fieldSets {
      for order in EmployeeOrder.allCases {
        for filter in filters {
          for (size, count) in [(1, 1), (4, 3), (50, 1), (7, 2)] {
            var cursor: EmployeeCursor?
            var rows = 0
            repeat {
              let read = try await store.employeePages(
                fields: fields,
                filter: filter,
                order: order,
                after: cursor,
                limit: size,
                count: count
              )
              let written = try await store.writtenEmployeePages(
                fields: fields,
                filter: filter,
                order: order,
                after: cursor,
                limit: size,
                count: count,
                writer: writer
              )
              try Self.require(
                written.count == read.count,
                "\(fields.rawValue) \(order): \(written.count) written pages, \(read.count) read"
              )
              for (page, expected) in zip(written, read) {
                try Self.require(
                  page.rowCount == expected.employees.count && page.next == expected.next
                    && page.bytes == expected.employees.flatMap(DescribingWriter.describe),
                  "\(fields.rawValue) \(order) \(filter) pages of \(size): a written page differs from the page read"
                )
                rows += page.rowCount
              }
              cursor = read[read.count - 1].next
            } while cursor != nil
            if fields == .all, filter.isEmpty {
              try Self.require(rows == made.count, "written pages held \(rows) rows")
            }
          }
        }
      }
    }
  }

  /// Writes each row as the text of the employee it holds: the row's fields, read from its bytes.
  struct DescribingWriter: EmployeeRowWriter {
    func append(_ row: EmployeeRow, to bytes: inout [UInt8]) {
      bytes += Self.describe(Employee(row))
    }

    func append(_ employee: Employee, to bytes: inout [UInt8]) {
      bytes += Self.describe(employee)
    }

    static func describe(_ employee: Employee) -> [UInt8] {
      Array("\(employee)\n".utf8)
    }
  }

  static func filtersAgreeWithCounts(_ store: Store) async throws {
    let made = try await Self.create(store, Self.names)
    let filters = [
      EmployeeFilter(), EmployeeFilter(department: "Design"), EmployeeFilter(active: false),
      EmployeeFilter(department: "Sales", active: true), EmployeeFilter(nameContains: "NUÑ"),
      EmployeeFilter(nameContains: "lecka"), EmployeeFilter(nameContains: "zzzz"),
      EmployeeFilter(department: "Nobody"),
      // Names shorter than three folded characters, within a department: PostgreSQL tests
      // them by position (`PostgresEmployeeSQL.nameTerm`), folded, with no LIKE specials.
      EmployeeFilter(department: "Design", nameContains: "Ñ"),
      EmployeeFilter(department: "Sales", active: true, nameContains: "a"),
      EmployeeFilter(department: "Design", nameContains: "Łe"),
      EmployeeFilter(department: "Design", nameContains: "%"),
      EmployeeFilter(department: "Sales", nameContains: "_"),
      EmployeeFilter(department: "Sales", nameContains: "NUÑEZ"),
      EmployeeFilter(department: "Design", active: false, nameContains: "lace"),
    ]
    for filter in filters {
      let expected = made.filter { employee in
        (filter.department.map { employee.department == $0 } ?? true)
          && (filter.active.map { employee.active == $0 } ?? true)
          && (filter.nameContains.map {
            TextFolding.fold(employee.name).contains(TextFolding.fold($0))
          } ?? true)
      }
      let walked = try await Self.walk(store, order: .name, filter: filter, size: 3)
      try Self.require(
        Set(walked.map(\.guid)) == Set(expected.map(\.guid)),
        "\(filter) matched \(walked.map(\.name))"
      )
      let count = try await store.countEmployees(filter: filter)
      try Self.require(
        count == Int64(expected.count),
        "\(filter): count \(count), expected \(expected.count)"
      )
    }
    let accents = try await Self.walk(
      store,
      order: .name,
      filter: EmployeeFilter(nameContains: "jose nunez"),
      size: 10
    )
    try Self.require(
      accents.count == 2,
      "search ignores case and diacritics: \(accents.map(\.name))"
    )
  }
}
