package import GRPCCore
internal import NIOHPACK

// How the codec reads a request's headers: the checks grpc-swift makes, and the method a path
// names.
extension GRPCStreamCodec {
  /// What grpc-swift answers a request whose headers it refuses, in its order of checks; nil
  /// for headers it takes.
  static func refusal(of headers: HPACKHeaders) -> HPACKHeaders? {
    func status(_ code: Status.Code, _ message: String) -> HPACKHeaders {
      HPACKHeaders(status: Status(code: code, message: message), metadata: [:], trailersOnly: true)
    }
    guard let contentType = headers.first(name: "content-type"),
      contentType == "application/grpc" || contentType == "application/grpc+proto"
    else {
      return [":status": "415"]
    }
    guard headers.first(name: ":path") != nil else {
      return status(.invalidArgument, "No :path header has been set.")
    }
    guard let scheme = headers.first(name: ":scheme"), scheme == "http" || scheme == "https" else {
      return status(
        .invalidArgument,
        ":scheme header must be present and one of \"http\" or \"https\"."
      )
    }
    guard headers.first(name: ":method") == "POST" else {
      return status(
        .invalidArgument,
        ":method header is expected to be present and have a value of \"POST\"."
      )
    }
    let encodings = headers[canonicalForm: "grpc-encoding"]
    guard encodings.count <= 1 else {
      return status(.internalError, "encoding must contain no more than one value.")
    }
    if let encoding = encodings.first, encoding != "identity",
      MessageEncoding(rawValue: encoding) == nil
    {
      var refused = status(
        .unimplemented,
        "\(encoding) compression is not supported; supported algorithms are listed in grpc-accept-encoding"
      )
      refused.add(name: "grpc-accept-encoding", value: MessageEncoding.acceptHeader)
      return refused
    }
    return nil
  }
}

extension MethodDescriptor {
  /// The method a `:path` of the form `/service/method` names, as grpc-swift's transport reads
  /// it; nil for any other form.
  package init?(path: String) {
    let utf8 = path.utf8
    guard utf8.first == UInt8(ascii: "/") else { return nil }
    let rest = utf8.dropFirst()
    guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return nil }
    self.init(
      fullyQualifiedService: String(rest[rest.startIndex ..< slash])!,
      method: String(rest[rest.index(after: slash)...])!
    )
  }
}
