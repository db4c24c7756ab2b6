package import NIOCore
internal import NIOHPACK
package import NIOHTTP2

/// Gives grpc-swift's HTTP/2 transport (`--transport grpc-swift`) Roster's rule for compressed
/// responses (`MessageEncoding`): sits first in each stream's pipeline and, in the request's
/// HEADERS, keeps in `grpc-accept-encoding` only the encoding `MessageEncoding.forResponses`
/// chooses, or none. grpc-swift compresses every response in the first encoding the client
/// accepts; after this filter, only responses to a compressed request, in the request's own
/// encoding, and never pictures. (Its size floor, `minimumResponseBytes`, is Roster's
/// transport's alone: grpc-swift compresses whatever it answers once a call is compressed.)
package final class ResponseEncodingFilter: ChannelInboundHandler, RemovableChannelHandler {
  package typealias InboundIn = HTTP2Frame.FramePayload
  package typealias InboundOut = HTTP2Frame.FramePayload

  package init() {}

  package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    defer { context.pipeline.syncOperations.removeHandler(self, promise: nil) }
    guard case .headers(var headers) = self.unwrapInboundIn(data),
      headers.headers.contains(name: "grpc-accept-encoding")
    else {
      context.fireChannelRead(data)
      return
    }
    let service =
      headers.headers.first(name: ":path")?.split(separator: "/").first.map(String.init) ?? ""
    let requestEncoding = try? MessageEncoding.of(request: headers.headers).get()
    let chosen = MessageEncoding.forResponses(
      request: headers.headers,
      requestEncoding: requestEncoding ?? nil,
      service: service
    )
    headers.headers.remove(name: "grpc-accept-encoding")
    if let chosen {
      headers.headers.add(name: "grpc-accept-encoding", value: chosen.rawValue)
    }
    context.fireChannelRead(self.wrapInboundOut(.headers(headers)))
  }
}
