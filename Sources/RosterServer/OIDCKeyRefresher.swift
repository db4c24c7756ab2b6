internal import AsyncHTTPClient
internal import Foundation
internal import Logging
internal import NIOCore
internal import RosterIdentity
public import RosterServices
internal import ServiceLifecycle

/// Keeps a `TokenVerifier`'s keys current: the provider's discovery document
/// (`ISSUER/.well-known/openid-configuration`), then the key set its `jwks_uri` names, fetched
/// at start, every `refreshInterval`, and when a token names a key id the set does not hold.
///
/// A provider that cannot be reached leaves the keys it last gave in use, and is logged; until
/// the first fetch succeeds, it is tried again after 2, 4, 8 … seconds.
///
/// ```swift
/// let group = ServiceGroup(services: [OIDCKeyRefresher(verifier: verifier, logger: logger)], logger: logger)
/// ```
struct OIDCKeyRefresher: Service {
  let verifier: TokenVerifier
  let logger: Logger

  /// The largest document read from the provider.
  static let maximumDocumentBytes = 1 << 20
  /// How long one request to the provider may take.
  static let requestTimeout = TimeAmount.seconds(10)

  func run() async throws {
    await cancelWhenGracefulShutdown {
      var failures = 0
      var loaded: [String] = []
      while !Task.isCancelled {
        do {
          let kids = try await self.fetch()
          if kids != loaded {
            self.logger.info(
              "identity provider keys loaded",
              metadata: ["issuer": "\(self.verifier.settings.issuer)", "kids": "\(kids)"]
            )
          }
          (loaded, failures) = (kids, 0)
        } catch is CancellationError {
          return
        } catch {
          failures += 1
          self.logger.warning(
            "could not fetch the identity provider's keys; the keys fetched before stay in use",
            metadata: [
              "issuer": "\(self.verifier.settings.issuer)", "error": "\(error)",
              "failures": "\(failures)",
            ]
          )
        }
        let interval = self.verifier.settings.refreshInterval
        let wait = failures == 0 ? interval : min(interval, .seconds(1 << min(failures, 8)))
        await self.verifier.refetchRequested(within: wait)
      }
    }
  }

  /// The discovery document, then the key set, installed into the verifier.
  private func fetch() async throws -> [String] {
    let issuer = self.verifier.settings.issuer
    let discovery = try await self.get(
      (issuer.hasSuffix("/") ? issuer : issuer + "/") + ".well-known/openid-configuration"
    )
    guard let document = try? JSONSerialization.jsonObject(with: discovery) as? [String: Any],
      let keysURL = document["jwks_uri"] as? String
    else { throw FetchError(message: "the discovery document names no jwks_uri") }
    guard document["issuer"] as? String == issuer else {
      throw FetchError(message: "the discovery document names another issuer")
    }
    try Self.check(url: keysURL)
    return try await self.verifier.install(jwks: try await self.get(keysURL))
  }

  private func get(_ url: String) async throws -> Data {
    var request = HTTPClientRequest(url: url)
    request.headers.add(name: "Accept", value: "application/json")
    let response = try await HTTPClient.shared.execute(request, timeout: Self.requestTimeout)
    guard response.status == .ok else {
      throw FetchError(message: "\(url) answered HTTP \(response.status.code)")
    }
    let body = try await response.body.collect(upTo: Self.maximumDocumentBytes)
    return Data(body.readableBytesView)
  }

  /// Refuses a provider URL that is not HTTPS, but plain HTTP to loopback (a test provider):
  /// keys fetched in the clear could be anyone's.
  static func check(url: String) throws {
    guard let parts = URLComponents(string: url), let host = parts.host else {
      throw FetchError(message: "\(url) is not a URL")
    }
    guard parts.scheme == "https" || (parts.scheme == "http" && ServerConfig.isLoopback(host))
    else {
      throw FetchError(
        message: "\(url): the provider must be reached over https (http only on loopback)"
      )
    }
  }

  struct FetchError: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
  }
}

extension SignIn {
  /// Checks the settings a provider is named by before the server starts: its issuer URL is
  /// HTTPS (or HTTP on loopback).
  public static func checkIssuer(_ issuer: String) throws {
    try OIDCKeyRefresher.check(url: issuer)
  }
}
