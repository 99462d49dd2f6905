/// One RTCP packet of a compound packet (RFC 3550 §6.1), by type.
public enum RTCPPacket: Sendable, Equatable {
    case senderReport(SenderReport)
    case receiverReport(ReceiverReport)
    case sourceDescription(SourceDescription)
    case goodbye(Goodbye)
    case nack(GenericNACK)
    case transportFeedback(TransportCCFeedback)
    case pictureLossIndication(PictureLossIndication)
    case fullIntraRequest(FullIntraRequest)
    case remb(ReceiverEstimatedMaximumBitrate)
    /// A type or feedback format this endpoint does not act on, kept whole.
    case unknown(packetType: UInt8, count: UInt8, bytes: [UInt8])

    /// Parses a compound packet: one or more RTCP packets back to back, each sized by its header.
    public static func parseCompound(_ bytes: [UInt8]) throws(ParseError) -> [RTCPPacket] {
        guard !bytes.isEmpty else { throw ParseError("RTCP compound", "empty") }
        var packets: [RTCPPacket] = []
        var offset = 0
        while offset < bytes.count {
            let header = try RTCPHeader(parsing: bytes, at: offset)
            var body = Array(bytes[offset..<(offset + header.size)])
            if header.padding {
                guard let pad = body.last, pad > 0, Int(pad) <= body.count - RTCPHeader.size else {
                    throw ParseError("RTCP packet type \(header.packetType)", "bad padding count")
                }
                body.removeLast(Int(pad))
            }
            packets.append(try parse(body, header: header))
            offset += header.size
        }
        return packets
    }

    static func parse(_ body: [UInt8], header: RTCPHeader) throws(ParseError) -> RTCPPacket {
        switch (header.packetType, header.count) {
        case (RTCPHeader.senderReport, _): return .senderReport(try SenderReport(parsing: body, header: header))
        case (RTCPHeader.receiverReport, _): return .receiverReport(try ReceiverReport(parsing: body, header: header))
        case (RTCPHeader.sourceDescription, _): return .sourceDescription(try SourceDescription(parsing: body, header: header))
        case (RTCPHeader.goodbye, _): return .goodbye(try Goodbye(parsing: body, header: header))
        case (RTCPHeader.transportFeedback, GenericNACK.format): return .nack(try GenericNACK(parsing: body))
        case (RTCPHeader.transportFeedback, TransportCCFeedback.format): return .transportFeedback(try TransportCCFeedback(parsing: body))
        case (RTCPHeader.payloadFeedback, PictureLossIndication.format): return .pictureLossIndication(try PictureLossIndication(parsing: body))
        case (RTCPHeader.payloadFeedback, FullIntraRequest.format): return .fullIntraRequest(try FullIntraRequest(parsing: body))
        case (RTCPHeader.payloadFeedback, ReceiverEstimatedMaximumBitrate.format):
            if body.count >= 16, Array(body[12..<16]) == ReceiverEstimatedMaximumBitrate.identifier {
                return .remb(try ReceiverEstimatedMaximumBitrate(parsing: body))
            }
            return .unknown(packetType: header.packetType, count: header.count, bytes: body)
        default:
            return .unknown(packetType: header.packetType, count: header.count, bytes: body)
        }
    }

    public var serializedSize: Int {
        switch self {
        case .senderReport(let p): p.serializedSize
        case .receiverReport(let p): p.serializedSize
        case .sourceDescription(let p): p.serializedSize
        case .goodbye(let p): p.serializedSize
        case .nack(let p): p.serializedSize
        case .transportFeedback(let p): p.serializedSize
        case .pictureLossIndication: PictureLossIndication.size
        case .fullIntraRequest(let p): p.serializedSize
        case .remb(let p): p.serializedSize
        case .unknown(_, _, let bytes): bytes.count
        }
    }

    public func serialize(into out: inout [UInt8]) {
        switch self {
        case .senderReport(let p): p.serialize(into: &out)
        case .receiverReport(let p): p.serialize(into: &out)
        case .sourceDescription(let p): p.serialize(into: &out)
        case .goodbye(let p): p.serialize(into: &out)
        case .nack(let p): p.serialize(into: &out)
        case .transportFeedback(let p): p.serialize(into: &out)
        case .pictureLossIndication(let p): p.serialize(into: &out)
        case .fullIntraRequest(let p): p.serialize(into: &out)
        case .remb(let p): p.serialize(into: &out)
        case .unknown(_, _, let bytes): out += bytes
        }
    }

    public static func serializeCompound(_ packets: [RTCPPacket]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(packets.reduce(0) { $0 + $1.serializedSize })
        for packet in packets { packet.serialize(into: &out) }
        return out
    }
}
