import ArgumentParser

/// The `roster` command: the server, the demo-data tools and a small client.
@main
struct Roster: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "roster",
    abstract: "A gRPC employee directory on WAL-mode SQLite.",
    subcommands: [
      Serve.self, Seed.self, Import.self, Upsert.self, List.self, Get.self, Token.self,
      Backup.self, Restore.self, Check.self, Copy.self,
      Load.self, Explain.self,
    ]
  )
}
