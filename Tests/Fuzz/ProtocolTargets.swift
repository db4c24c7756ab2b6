import Foundation
import GRPCCore
import GRPCProtobuf
import NIOCore
import RosterProto
import SwiftProtobuf

@testable import RosterProtocols

/// The Connect and gRPC-Web layer: request envelopes, a GET's query, and JSON requests.
enum ProtocolTargets {
  /// A Connect or gRPC-Web body (binary, or gRPC-Web's base64 text), in pieces, through
  /// `EnvelopeReader` with a small limit. What must hold: no envelope over the limit; in binary,
  /// the envelopes are exactly the length-prefixed messages of the bytes, however they are cut.
  static func envelopes(_ bytes: UnsafeBufferPointer<UInt8>) {
    let limit = 1024
    var input = FuzzInput(bytes)
    let text = input.choice(2) == 1
    var reader = EnvelopeReader(limit: limit, text: text)
    var envelopes: [Envelope] = []
    var sent: [UInt8] = []
    var refused = false
    while !input.isEmpty {
      let piece = input.piece(most: 100)
      sent += piece
      do {
        envelopes += try reader.append(ByteBuffer(bytes: piece))
      } catch let error as RPCError {
        require(
          error.code == .resourceExhausted || error.code == .invalidArgument,
          "refused with \(error.code)"
        )
        refused = true
        break
      } catch {
        require(false, "refused with \(error)")
      }
    }
    for envelope in envelopes {
      require(envelope.payload.readableBytes <= limit, "an envelope over the limit")
    }
    guard !text, !refused else { return }
    var expected: [(UInt8, [UInt8])] = []
    var at = 0
    while sent.count - at >= 5 {
      let length = sent[at + 1 ..< at + 5].reduce(0) { $0 << 8 | Int($1) }
      guard sent.count - at - 5 >= length else { break }
      expected.append((sent[at], Array(sent[at + 5 ..< at + 5 + length])))
      at += 5 + length
    }
    require(
      envelopes.count == expected.count
        && zip(envelopes, expected).allSatisfy {
          $0.flags == $1.0 && Array($0.payload.readableBytesView) == $1.1
        },
      "\(envelopes.count) envelopes read, \(expected.count) sent"
    )
    require(reader.isEmpty == (at == sent.count), "what is left over: \(sent.count - at) bytes")
  }

  /// A Connect GET's query. What must hold: any query gets a message or a refusal whose
  /// text is bounded; a message sent as base64url comes back byte for byte.
  static func getQuery(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let query = String(decoding: input.field(until: 0), as: UTF8.self)
    switch ConnectUnary.getMessage(Substring(query)) {
    case .success: ()
    case .failure(let refusal):
      require(
        refusal.reply.body.readableBytes <= 1024,
        "a refusal of \(refusal.reply.body.readableBytes) bytes"
      )
    }
    let message = Array(input.rest())
    let encoded = Data(message).base64EncodedString()
      .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
    let roundTrip = "encoding=proto&base64=1&message=\(encoded)&compression=identity"
    guard
      case .success(let (encoding, decoded, compression)) = ConnectUnary.getMessage(
        Substring(roundTrip)
      )
    else {
      return require(false, "a base64url message was refused")
    }
    require(
      encoding == .proto && decoded == message && compression == nil,
      "the base64url message came back as \(decoded)"
    )
  }

  /// Every request message the services take, for `jsonRequest` to pick from.
  static let requestTypes: [any SwiftProtobuf.Message.Type] = [
    Roster_V1_AggregateEmployeesRequest.self, Roster_V1_AggregateSalesRequest.self,
    Roster_V1_BatchGetEmployeesRequest.self, Roster_V1_BatchUpdateEmployeesRequest.self,
    Roster_V1_CountEmployeesRequest.self, Roster_V1_CreateEmployeeRequest.self,
    Roster_V1_DeleteEmployeeRequest.self, Roster_V1_DeleteEmployeesRequest.self,
    Roster_V1_DeletePictureRequest.self, Roster_V1_DeleteSalesRequest.self,
    Roster_V1_DepartmentHeadcountsRequest.self, Roster_V1_DepartmentSummaryRequest.self,
    Roster_V1_EmployeeSalesRequest.self, Roster_V1_GetEmployeeRequest.self,
    Roster_V1_GetPictureRequest.self, Roster_V1_GetThumbnailRequest.self,
    Roster_V1_ImportSalesRequest.self, Roster_V1_ListEmployeesRequest.self,
    Roster_V1_LookupEmployeeRequest.self, Roster_V1_PutPictureRequest.self,
    Roster_V1_SalesCalendarRequest.self, Roster_V1_UpdateEmployeeRequest.self,
    Roster_V1_UpsertEmployeesRequest.self, Roster_V1_WatchChangesRequest.self,
  ]

  /// A JSON request body for a request type the input picks, as Connect's `application/json`
  /// calls decode it. What must hold: a message decodes and round-trips through JSON; a
  /// refusal is `INVALID_ARGUMENT` with a message of bounded length (it may name a field).
  static func jsonRequest(_ bytes: UnsafeBufferPointer<UInt8>) {
    var input = FuzzInput(bytes)
    let type = Self.requestTypes[input.choice(Self.requestTypes.count)]
    Self.decodeJSON(type, Array(input.rest()))
  }

  private static func decodeJSON<Message: SwiftProtobuf.Message>(
    _ type: Message.Type,
    _ json: [UInt8]
  ) {
    do {
      let message = try JSONMessages.decode(Message.self, from: ByteBuffer(bytes: json))
      let again = try JSONMessages.decode(
        Message.self,
        from: ByteBuffer(bytes: try message.jsonUTF8Bytes() as [UInt8])
      )
      require(
        again.isEqualTo(message: message),
        "\(Message.protoMessageName) changed in a JSON round trip"
      )
    } catch let status as GoogleRPCStatus {
      require(status.code == .invalidArgument, "refused with \(status.code)")
      require(
        status.message.utf8.count <= 1024,
        "a refusal of \(status.message.utf8.count) bytes: \(status.message.prefix(200))"
      )
    } catch {
      require(false, "\(Message.protoMessageName): \(error)")
    }
  }
}
