/// Generic NACK (RFC 4585 §6.2.1), RTPFB with FMT = 1. Each FCI entry names a lost packet (PID)
/// and a bitmask of the 16 following ones (BLP):
///
///     |            PID                |             BLP               |
public struct GenericNACK: Sendable, Equatable {
    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var entries: [(packetID: UInt16, bitmask: UInt16)]

    static let format: UInt8 = 1
    static let fixedSize = 12

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, lost: [UInt16]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.entries = []
        // Group sequence numbers (in the order given, wrap-aware) into PID + 16-bit masks.
        for seq in lost {
            if let last = entries.last {
                let distance = seq &- last.packetID
                if distance >= 1 && distance <= 16 {
                    entries[entries.count - 1].bitmask |= 1 << (distance - 1)
                    continue
                }
                if distance == 0 { continue }
            }
            entries.append((seq, 0))
        }
    }

    /// Every sequence number the NACK asks for.
    public var lostSequenceNumbers: [UInt16] {
        var out: [UInt16] = []
        for entry in entries {
            out.append(entry.packetID)
            for bit in 0..<16 where entry.bitmask & (UInt16(1) << UInt16(bit)) != 0 {
                out.append(entry.packetID &+ UInt16(bit + 1))
            }
        }
        return out
    }

    init(parsing body: [UInt8]) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let sender = reader.readUInt32(), let media = reader.readUInt32() else {
            throw .truncated("RTCP generic NACK", need: Self.fixedSize, have: body.count)
        }
        senderSSRC = sender
        mediaSSRC = media
        entries = []
        while reader.remaining >= 4 {
            entries.append((reader.readUInt16()!, reader.readUInt16()!))
        }
        guard !entries.isEmpty else { throw ParseError("RTCP generic NACK", "no FCI entry") }
    }

    var serializedSize: Int { Self.fixedSize + 4 * entries.count }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: Self.format, packetType: RTCPHeader.transportFeedback, size: serializedSize).serialize(into: &out)
        out.writeUInt32(senderSSRC)
        out.writeUInt32(mediaSSRC)
        for entry in entries {
            out.writeUInt16(entry.packetID)
            out.writeUInt16(entry.bitmask)
        }
    }

    public static func == (a: GenericNACK, b: GenericNACK) -> Bool {
        a.senderSSRC == b.senderSSRC && a.mediaSSRC == b.mediaSSRC
            && a.entries.map(\.packetID) == b.entries.map(\.packetID) && a.entries.map(\.bitmask) == b.entries.map(\.bitmask)
    }
}

/// Picture loss indication (RFC 4585 §6.3.1), PSFB with FMT = 1 and no FCI.
public struct PictureLossIndication: Sendable, Equatable {
    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32

    static let format: UInt8 = 1
    static let size = 12

    public init(senderSSRC: UInt32, mediaSSRC: UInt32) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
    }

    init(parsing body: [UInt8]) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let sender = reader.readUInt32(), let media = reader.readUInt32() else {
            throw .truncated("RTCP PLI", need: Self.size, have: body.count)
        }
        senderSSRC = sender
        mediaSSRC = media
    }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: Self.format, packetType: RTCPHeader.payloadFeedback, size: Self.size).serialize(into: &out)
        out.writeUInt32(senderSSRC)
        out.writeUInt32(mediaSSRC)
    }
}

/// Full intra request (RFC 5104 §4.3.1), PSFB with FMT = 4. The media SSRC field is unused (0);
/// each FCI entry names the target SSRC and a command sequence number:
///
///     |                              SSRC                             |
///     | Seq nr.       |    Reserved                                   |
public struct FullIntraRequest: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var ssrc: UInt32
        public var sequenceNumber: UInt8
        public init(ssrc: UInt32, sequenceNumber: UInt8) {
            self.ssrc = ssrc
            self.sequenceNumber = sequenceNumber
        }
    }

    public var senderSSRC: UInt32
    public var entries: [Entry]

    static let format: UInt8 = 4
    static let fixedSize = 12

    public init(senderSSRC: UInt32, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.entries = entries
    }

    init(parsing body: [UInt8]) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let sender = reader.readUInt32(), reader.readUInt32() != nil else {
            throw .truncated("RTCP FIR", need: Self.fixedSize, have: body.count)
        }
        senderSSRC = sender
        entries = []
        while reader.remaining >= 8 {
            let ssrc = reader.readUInt32()!
            let seq = reader.readUInt8()!
            _ = reader.skip(3)
            entries.append(Entry(ssrc: ssrc, sequenceNumber: seq))
        }
        guard !entries.isEmpty else { throw ParseError("RTCP FIR", "no FCI entry") }
    }

    var serializedSize: Int { Self.fixedSize + 8 * entries.count }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: Self.format, packetType: RTCPHeader.payloadFeedback, size: serializedSize).serialize(into: &out)
        out.writeUInt32(senderSSRC)
        out.writeUInt32(0)
        for entry in entries {
            out.writeUInt32(entry.ssrc)
            out += [entry.sequenceNumber, 0, 0, 0]
        }
    }
}

/// Receiver estimated maximum bitrate (draft-alvestrand-rmcat-remb-03), PSFB with FMT = 15:
///
///     |  Unique identifier 'R' 'E' 'M' 'B'                            |
///     |  Num SSRC     | BR Exp    |  BR Mantissa                      |
///     |   SSRC feedback                                               |  ...
public struct ReceiverEstimatedMaximumBitrate: Sendable, Equatable {
    public var senderSSRC: UInt32
    /// Bits per second, as mantissa × 2^exp (18-bit mantissa, 6-bit exponent).
    public var bitrate: UInt64
    public var ssrcs: [UInt32]

    static let format: UInt8 = 15
    static let identifier: [UInt8] = Array("REMB".utf8)

    public init(senderSSRC: UInt32, bitrate: UInt64, ssrcs: [UInt32]) {
        self.senderSSRC = senderSSRC
        self.ssrcs = ssrcs
        // Round down to what the 18-bit mantissa can say, so parse(serialize(x)) == x.
        var exponent: UInt64 = 0
        while bitrate >> exponent > 0x3ffff { exponent += 1 }
        self.bitrate = (bitrate >> exponent) << exponent
    }

    init(parsing body: [UInt8]) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let sender = reader.readUInt32(), reader.readUInt32() != nil, let id = reader.readBytes(4), id == Self.identifier,
              let count = reader.readUInt8(), let rest = reader.readUInt24() else {
            throw ParseError("RTCP REMB", "truncated or not a REMB (no 'REMB' identifier)")
        }
        senderSSRC = sender
        bitrate = UInt64(rest & 0x3ffff) << UInt64(rest >> 18)
        ssrcs = []
        for _ in 0..<count {
            guard let ssrc = reader.readUInt32() else { throw ParseError("RTCP REMB", "SSRC list truncated") }
            ssrcs.append(ssrc)
        }
    }

    var serializedSize: Int { 20 + 4 * ssrcs.count }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: Self.format, packetType: RTCPHeader.payloadFeedback, size: serializedSize).serialize(into: &out)
        out.writeUInt32(senderSSRC)
        out.writeUInt32(0)
        out += Self.identifier
        out.append(UInt8(ssrcs.count))
        var exponent: UInt64 = 0
        while bitrate >> exponent > 0x3ffff { exponent += 1 }
        out.writeUInt24(UInt32(exponent) << 18 | UInt32(bitrate >> exponent))
        for ssrc in ssrcs { out.writeUInt32(ssrc) }
    }
}
