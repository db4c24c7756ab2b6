import Foundation
import RosterDomain
import RosterSQLite
import RosterSeed
import StoreContract
import TestSupport
import Testing

/// The store contract (`Tests/StoreContract`) on the SQLite backend: each clause on a new,
/// empty store.
@Suite("Store contract on SQLite", .timeLimit(.minutes(10)))
struct StoreContractTests {
  @Test("the SQLite store keeps the store contract", arguments: StoreContract.Clause.allCases)
  func clause(_ clause: StoreContract.Clause) async throws {
    let jpeg = Data(try DemoPictures.jpeg(width: 400, height: 300, seed: 7, noise: 10))
    try await withTemporaryStore { store in
      try await StoreContract.check(clause, store, StoreContract.Fixtures(jpeg: jpeg))
    }
  }
}
