internal import Foundation
internal import NIOSSL
internal import PostgresNIO
internal import RosterDomain

extension PostgresURL {
  /// TLS as `sslMode` and `sslRootCert` ask for it, as libpq reads them.
  enum TLSChoice {
    case disable
    case prefer(TLSConfiguration)
    case require(TLSConfiguration)
  }

  /// - Throws: `invalidArgument` when a mode that checks certificates has no CA file to check
  ///   against, or the file cannot be read.
  func tlsChoice() throws -> TLSChoice {
    switch self.sslMode {
    case .disable:
      return .disable
    case .allow, .prefer:
      return .prefer(try self.tlsConfiguration(verification: .none))
    case .require:
      return .require(
        try self.tlsConfiguration(
          verification: self.sslRootCert == nil ? .none : .noHostnameVerification
        )
      )
    case .verifyCA:
      return .require(try self.tlsConfiguration(verification: .noHostnameVerification))
    case .verifyFull:
      return .require(try self.tlsConfiguration(verification: .fullVerification))
    }
  }

  /// For one connection of its own (the migrator's).
  func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
    switch try self.tlsChoice() {
    case .disable: .disable
    case .prefer(let tls): .prefer(try NIOSSLContext(configuration: tls))
    case .require(let tls): .require(try NIOSSLContext(configuration: tls))
    }
  }

  /// For the pool.
  func clientTLS() throws -> PostgresClient.Configuration.TLS {
    switch try self.tlsChoice() {
    case .disable: .disable
    case .prefer(let tls): .prefer(tls)
    case .require(let tls): .require(tls)
    }
  }

  private func tlsConfiguration(verification: CertificateVerification) throws -> TLSConfiguration {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.certificateVerification = verification
    guard verification != .none else { return tls }
    let file = self.sslRootCert ?? (NSHomeDirectory() + "/.postgresql/root.crt")
    if file == "system" { return tls }
    guard FileManager.default.isReadableFile(atPath: file) else {
      throw StoreError(
        .invalidArgument,
        "--postgres sslmode=\(self.sslMode.rawValue) needs the CA certificate in sslrootcert; '\(file)' cannot be read"
      )
    }
    do {
      tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
    } catch {
      throw StoreError(
        .invalidArgument,
        "--postgres sslrootcert '\(file)' holds no PEM certificate: \(error)"
      )
    }
    return tls
  }

  /// A failed TLS handshake, said plainly (a certificate the CA does not vouch for, a host it
  /// does not name, a server without TLS under `require`); nil for other errors.
  func tlsFailure(_ error: any Error) -> StoreError? {
    var text = String(reflecting: error)
    if let error = error as? PSQLError, let underlying = error.underlying {
      text += " " + String(reflecting: underlying)
    }
    let unsupported = (error as? PSQLError)?.code == .sslUnsupported
    let isTLS =
      unsupported || text.contains("NIOSSL") || text.contains("BoringSSL")
      || text.contains("handshake")
    guard isTLS else { return nil }
    let why =
      unsupported
      ? "the server does not offer TLS"
      : "the TLS handshake failed (the server's certificate is not trusted by sslrootcert, or does not name the host)"
    return StoreError(
      .unavailable,
      "cannot connect to PostgreSQL at \(self.host):\(self.port) with sslmode=\(self.sslMode.rawValue): \(why)"
    )
  }
}
