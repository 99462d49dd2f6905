/// The header every RTCP packet starts with (RFC 3550 §6.4.1):
///
///      0                   1                   2                   3
///     |V=2|P|  count  |      PT       |             length            |
///
/// `count` is the report count, SDES chunk count, BYE source count, or the feedback message type
/// (FMT, RFC 4585 §6.1); `length` is the packet size in 32-bit words minus one.
struct RTCPHeader: Equatable {
    var padding: Bool
    var count: UInt8
    var packetType: UInt8
    /// Total size of the packet including this header, in bytes.
    var size: Int

    static let size = 4
    static let countMask: UInt8 = 0x1f
    static let paddingBit: UInt8 = 0x20

    static let senderReport: UInt8 = 200
    static let receiverReport: UInt8 = 201
    static let sourceDescription: UInt8 = 202
    static let goodbye: UInt8 = 203
    static let transportFeedback: UInt8 = 205   // RTPFB, RFC 4585
    static let payloadFeedback: UInt8 = 206     // PSFB, RFC 4585

    init(padding: Bool = false, count: UInt8, packetType: UInt8, size: Int) {
        self.padding = padding
        self.count = count
        self.packetType = packetType
        self.size = size
    }

    init(parsing bytes: [UInt8], at offset: Int) throws(ParseError) {
        var reader = ByteReader(bytes, offset: offset)
        guard let first = reader.readUInt8(), let type = reader.readUInt8(), let words = reader.readUInt16() else {
            throw .truncated("RTCP header", need: offset + Self.size, have: bytes.count)
        }
        guard first >> 6 == 2 else { throw ParseError("RTCP header", "version \(first >> 6), expected 2") }
        padding = first & Self.paddingBit != 0
        count = first & Self.countMask
        packetType = type
        size = (Int(words) + 1) * 4
        guard offset + size <= bytes.count else {
            throw .truncated("RTCP packet type \(type)", need: offset + size, have: bytes.count)
        }
    }

    func serialize(into out: inout [UInt8]) {
        out.append(2 << 6 | (padding ? Self.paddingBit : 0) | (count & Self.countMask))
        out.append(packetType)
        out.writeUInt16(UInt16(size / 4 - 1))
    }
}

/// RFC 5761 §4: on a port shared by RTP and RTCP, a second byte of 192 ... 223 (payload types
/// 64 ... 95 with the marker bit) is RTCP; RTP payload types are kept out of that range.
public func isRTCP(_ packet: [UInt8]) -> Bool {
    packet.count >= 2 && packet[0] >> 6 == 2 && (192...223).contains(packet[1])
}
