internal import RosterDomain
internal import RosterStore

/// LookupEmployee's read: an employee by e-mail address.
extension StoreContract {
  static func lookupByEmail(_ store: Store) async throws {
    var first = Self.person("Grace Hopper")
    first.email = "Grace.Hopper@Example.com"
    let made = try await store.createEmployee(first, context: Self.writer)
    var second = Self.person("Grace Hopper")
    second.email = "grace.hopper@example.com"
    let later = try await store.createEmployee(second, context: Self.writer)
    var other = Self.person("Ángel Núñez")
    other.email = "ÁNGEL@example.com"
    let angel = try await store.createEmployee(other, context: Self.writer)

    // ASCII letters in any case; of two that share the address, the one created first.
    let found = try await store.employee(email: "GRACE.HOPPER@example.COM", fields: .all)
    try Self.require(found.guid == made.guid, "the first created is found: \(found.guid)")
    let masked = try await store.employee(
      email: "grace.hopper@example.com",
      fields: [.guid, .email]
    )
    try Self.require(
      masked.guid == made.guid && masked.email == "Grace.Hopper@Example.com" && masked.name.isEmpty,
      "a read mask reads only its fields, the address as stored: \(masked)"
    )
    // Other letters are compared as they are.
    let exact = try await store.employee(email: "ÁNGEL@example.com", fields: [.guid])
    try Self.require(exact.guid == angel.guid, "an address with a non-ASCII letter: \(exact)")
    try await Self.requireError(.notFound, naming: "email", "a non-ASCII letter in another case") {
      _ = try await store.employee(email: "áNGEL@example.com", fields: [.guid])
    }
    try await Self.requireError(.notFound, naming: "email", "an address no one has") {
      _ = try await store.employee(email: "nobody@example.com", fields: .all)
    }

    // A new address finds its employee at once, and the old one finds the next.
    var changes = EmployeeChanges()
    changes.email = "amazing.grace@example.com"
    _ = try await store.updateEmployee(guid: made.guid, changes: changes, context: Self.writer)
    let moved = try await store.employee(email: "Amazing.Grace@example.com", fields: [.guid])
    try Self.require(moved.guid == made.guid, "the updated address: \(moved.guid)")
    let next = try await store.employee(email: "grace.hopper@example.com", fields: [.guid])
    try Self.require(next.guid == later.guid, "the old address, after the update: \(next.guid)")
    try await store.deleteEmployee(guid: later.guid, context: Self.writer)
    try await Self.requireError(.notFound, naming: "email", "a deleted employee's address") {
      _ = try await store.employee(email: "grace.hopper@example.com", fields: [.guid])
    }
  }
}
