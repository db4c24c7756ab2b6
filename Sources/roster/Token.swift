import ArgumentParser
import RosterServices

/// `roster token`: makes an API token. The server keeps only its hash.
struct Token: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Make an API token: prints the token, then the line for the tokens file.",
    discussion: """
      The first line is the token: give it to the client (--token, or ROSTER_TOKEN). The
      second is its SHA-256 with the role: append it to the file that `roster serve --tokens`
      reads. The token cannot be recovered from the file.
      """
  )

  @Option(
    help: "reader, hr, writer or admin.",
    transform: { name in
      guard let role = Role(name: name) else {
        throw ValidationError("--role must be reader, hr, writer or admin")
      }
      return role
    }
  )
  var role: Role

  @Option(help: "A label kept in the tokens file, such as who holds the token.")
  var label: String = ""

  func run() {
    let (token, line) = TokenTable.makeToken(role: self.role, label: self.label)
    print(token)
    print(line)
  }
}
