import Foundation
import RosterPostgres
import RosterSeed
import StoreContract
import TestSupport
import Testing

/// The store contract (`Tests/StoreContract`) on the PostgreSQL backend: each clause on a new,
/// empty schema of the throwaway server.
@Suite(
  "Store contract on PostgreSQL",
  .timeLimit(.minutes(10)),
  .enabled(if: PostgresTesting.enabled)
)
struct PostgresContractTests {
  @Test("the PostgreSQL store keeps the store contract", arguments: StoreContract.Clause.allCases)
  func clause(_ clause: StoreContract.Clause) async throws {
    let jpeg = Data(try DemoPictures.jpeg(width: 400, height: 300, seed: 7, noise: 10))
    try await PostgresTesting.withStore { store in
      try await StoreContract.check(clause, store, StoreContract.Fixtures(jpeg: jpeg))
    }
  }
}
