public import GRPCCore
internal import RosterDomain

/// Read-your-writes across machines: a write's reply carries the change token of its commit,
/// and a read that names it is served only by a database that has it (`CallControl.mustSee`).
///
/// A token is the change feed's sequence number once the write committed, in decimal, the
/// same as a `ChangeEvent.token`; it travels as the `x-roster-change-token` metadata entry, in
/// the reply's headers and in the read's request.
///
/// ```python
/// _, call = stub.UpdateEmployee.with_call(request)
/// token = dict(call.initial_metadata())["x-roster-change-token"]
/// stub.GetEmployee(get, metadata=[("x-roster-change-token", token)])
/// ```
public enum ChangeTokens {
  /// The metadata entry's name, in replies and requests.
  public static let key = "x-roster-change-token"

  /// The change a read's request names, if any.
  ///
  /// - Throws: `INVALID_ARGUMENT` naming the entry for a token that is not a feed position.
  static func mustSee(_ metadata: Metadata) throws -> Int64? {
    guard let text = metadata.firstString(Self.key) else { return nil }
    guard text.utf8.count <= 19, let sequence = Int64(text), sequence >= 0 else {
      throw RPCError(
        code: .invalidArgument,
        message:
          "\(Self.key) metadata: \(ClientText.quoted(text)) is not a change token this server issued"
      )
    }
    return sequence
  }

  /// The reply's headers for the call `control` served: its change token, when it wrote.
  static func replyHeaders(_ control: CallControl?) -> Metadata {
    guard let token = control?.changeToken else { return [:] }
    return [Self.key: "\(token)"]
  }
}
