import RosterDomain
import Testing

/// Client text in error messages: quoted whole when short, cut when long, so that a status
/// never echoes a request's megabytes; and the checks that quote it stay bounded.
@Suite("Client text in error messages")
struct ClientTextTests {
  @Test("short text is quoted whole; long text is cut to the limit, marked with an ellipsis")
  func quoting() {
    #expect(ClientText.quoted("abc") == "'abc'")
    let exact = String(repeating: "é", count: ClientText.limit)
    #expect(ClientText.quoted(exact) == "'\(exact)'")
    let long = String(repeating: "x", count: 4_000_000)
    let quoted = ClientText.quoted(long)
    #expect(quoted == "'" + String(repeating: "x", count: ClientText.limit) + "…'")
  }

  @Test("a 4 MB guid is refused with a message of bounded length")
  func longGUID() {
    let guid = String(repeating: "0", count: 4_000_000)
    let error = #expect(throws: StoreError.self) {
      try EmployeeValidation.requireGUID(guid)
    }
    #expect((error?.message.utf8.count ?? .max) < 200, "\(error?.message.prefix(100) ?? "")")
  }

  @Test("a length check counts characters, not bytes, and refuses past the limit")
  func lengthChecks() throws {
    try EmployeeValidation.checkLength("abc", field: "name", limit: 10)
    try EmployeeValidation.checkLength(String(repeating: "é", count: 10), field: "name", limit: 10)
    try EmployeeValidation.checkLength(String(repeating: "👩‍👩‍👧", count: 10), field: "name", limit: 10)
    #expect(throws: StoreError.self) {
      try EmployeeValidation.checkLength(
        String(repeating: "é", count: 11),
        field: "name",
        limit: 10
      )
    }
    let error = #expect(throws: StoreError.self) {
      try EmployeeValidation.checkLength(
        String(repeating: "x", count: 4_000_000),
        field: "name",
        limit: 200
      )
    }
    #expect(error?.message == "name is longer than 200 characters")
  }
}
