import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RosterProto
import TestSupport
import Testing

/// TLS and mutual TLS through the real binary, with certificates the test makes itself.
@Suite("TLS, end to end", .timeLimit(.minutes(10)))
struct TLSTests {
  /// A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA.
  static func makeCertificates(in directory: String) async throws {
    let script = """
      set -e
      cd '\(directory)'
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=roster-test-ca \\
        -keyout ca.key -out ca.pem 2>/dev/null
      openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext
      openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \\
        -extfile server.ext -out server.pem 2>/dev/null
      openssl req -newkey rsa:2048 -nodes -subj /CN=roster-client -keyout client.key -out client.csr 2>/dev/null
      openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \\
        -out client.pem 2>/dev/null
      """
    let status = try await RosterProcess.offPool {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = ["-c", script]
      try process.run()
      process.waitUntilExit()
      return process.terminationStatus
    }
    guard status == 0 else { throw CocoaError(.fileWriteUnknown) }
  }

  /// Counts employees over `security`; the error if the call fails.
  static func count(
    port: Int,
    _ security: HTTP2ClientTransport.Posix.TransportSecurity
  ) async -> Result<Int64, any Error> {
    do {
      return .success(
        try await withGRPCClient(
          transport: .http2NIOPosix(
            target: .ipv4(address: "127.0.0.1", port: port),
            transportSecurity: security
          )
        ) { client in
          var options = CallOptions.defaults
          options.timeout = .seconds(60)
          return try await Roster_V1_Directory.Client(wrapping: client).countEmployees(
            .init(),
            options: options
          ).count
        }
      )
    } catch {
      return .failure(error)
    }
  }

  @Test("TLS serves clients that trust the CA; mTLS also needs a client certificate")
  func tlsAndMutualTLS() async throws {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await Self.makeCertificates(in: directory)
    let trusting = HTTP2ClientTransport.Posix.TransportSecurity.tls { tls in
      tls.trustRoots = .certificates([.file(path: directory + "/ca.pem", format: .pem)])
    }
    let withCertificate = HTTP2ClientTransport.Posix.TransportSecurity.tls { tls in
      tls.trustRoots = .certificates([.file(path: directory + "/ca.pem", format: .pem)])
      tls.certificateChain = [.file(path: directory + "/client.pem", format: .pem)]
      tls.privateKey = .file(path: directory + "/client.key", format: .pem)
    }
    let tlsArguments = [
      "--db", directory + "/tls.sqlite", "--seed-employees", "25", "--no-seed-pictures",
      "--tls-cert", directory + "/server.pem", "--tls-key", directory + "/server.key",
    ]

    let server = try await RosterProcess.serve(arguments: tlsArguments)
    #expect(try await Self.count(port: server.port, trusting).get() == 25)
    // Plaintext to a TLS port, and TLS that does not trust the CA, both fail.
    await #expect(throws: (any Error).self) {
      try await Self.count(port: server.port, .plaintext).get()
    }
    await #expect(throws: (any Error).self) { try await Self.count(port: server.port, .tls).get() }
    #expect(server.terminate() == 0)

    let mutual = try await RosterProcess.serve(
      arguments: tlsArguments + ["--tls-client-ca", directory + "/ca.pem"]
    )
    await #expect(throws: (any Error).self) {
      try await Self.count(port: mutual.port, trusting).get()
    }
    #expect(try await Self.count(port: mutual.port, withCertificate).get() == 25)

    // The CLI client speaks it too.
    let cli = try await RosterProcess.run([
      "list", "--target", "127.0.0.1:\(mutual.port)", "--page-size", "3", "--json",
      "--tls-ca", directory + "/ca.pem", "--tls-cert", directory + "/client.pem",
      "--tls-key", directory + "/client.key",
    ])
    #expect(cli.status == 0, "\(cli.errors)")
    #expect(cli.output.contains("\"guid\""))
    #expect(mutual.terminate() == 0)
  }
}
