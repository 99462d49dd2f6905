/// Forward error correction for RTP (ULPFEC, RFC 5109), as libwebrtc carries it for VP8 inside
/// RED (RFC 2198, one primary block): an FEC packet is the XOR of a group of media packets, so
/// when exactly one of the group is lost the receiver rebuilds it from the others with no round
/// trip. Only level 0 is used (every byte of the protected packets), as libwebrtc does.
///
/// What is protected is each media packet as the receiver sees it after RED is taken off: its
/// whole RTP header but for the sequence number and SSRC, its CSRCs, header extensions,
/// payload and padding. So the sender XORs packets exactly as they go on the wire (stamped
/// with their transport-wide sequence numbers).
///
/// RFC 5109 §7.3, the FEC header, and §7.4, the level 0 header (L = 1: a 48-bit mask):
///
///     0                   1                   2                   3
///     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |E|L|P|X|  CC   |M| PT recovery |            SN base            |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |                          TS recovery                          |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |        length recovery        |       Protection Length       |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |             mask              |  mask cont. (L = 1 only)      |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///    |  mask cont. (L = 1 only)      |  level 0 payload (XOR) ...    |
///    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
public struct ULPFECPayload: Sendable, Equatable {
    /// The XOR of the protected packets' first header byte (P, X and CC bits), second byte
    /// (M and PT), timestamp and length past the 12-byte fixed header.
    public var headerRecovery: (byte0: UInt8, byte1: UInt8, timestamp: UInt32, length: UInt16)
    /// The lowest sequence number protected; mask bit i (from the left) protects `base + i`.
    public var sequenceBase: UInt16
    /// Bits 47...0 of a 48-bit mask, the leftmost (bit 47) for `sequenceBase` itself.
    public var mask: UInt64
    /// The XOR of the protected packets' bytes past their fixed header, each padded with zeros
    /// to the longest.
    public var payload: [UInt8]

    static let fixedHeaderSize = 12
    static let fecHeaderSize = 10
    static let eBit: UInt8 = 0x80, lBit: UInt8 = 0x40
    static let recoveryBits: UInt8 = 0x3f  // P, X and CC of the first byte
    /// Offsets a mask reaches: 16 with a short mask, 48 with a long one.
    public static let maxSpan = 48

    public static func == (a: ULPFECPayload, b: ULPFECPayload) -> Bool {
        a.headerRecovery == b.headerRecovery && a.sequenceBase == b.sequenceBase && a.mask == b.mask && a.payload == b.payload
    }

    /// Whether the mask reaches past 16 packets (L = 1).
    var isLongMask: Bool { mask & 0xffff_ffff != 0 }

    /// The sequence numbers this packet protects, in order.
    public var protectedSequenceNumbers: [UInt16] {
        (0..<Self.maxSpan).filter { mask & (1 << (47 - UInt64($0))) != 0 }.map { sequenceBase &+ UInt16($0) }
    }

    // MARK: Protecting

    /// The FEC payload of `packets` (serialized RTP, each with its RED taken off), which must
    /// lie within 48 sequence numbers of the lowest. Nil for none, or a wider span.
    public init?(protecting packets: [[UInt8]]) {
        guard !packets.isEmpty, packets.allSatisfy({ $0.count >= Self.fixedHeaderSize }) else { return nil }
        let numbers = packets.map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        // The lowest in sequence order (wrapping): the one every other is at most 47 after.
        guard let base = numbers.first(where: { b in numbers.allSatisfy { $0 &- b < UInt16(Self.maxSpan) } }) else { return nil }
        var byte0: UInt8 = 0, byte1: UInt8 = 0, timestamp: UInt32 = 0, length: UInt16 = 0, mask: UInt64 = 0
        var xor = [UInt8](repeating: 0, count: packets.map(\.count).max()! - Self.fixedHeaderSize)
        for (packet, number) in zip(packets, numbers) {
            byte0 ^= packet[0]
            byte1 ^= packet[1]
            timestamp ^= Self.readUInt32(packet, at: 4)
            length ^= UInt16(truncatingIfNeeded: packet.count - Self.fixedHeaderSize)
            mask |= 1 << (47 - UInt64(number &- base))
            for i in Self.fixedHeaderSize..<packet.count { xor[i - Self.fixedHeaderSize] ^= packet[i] }
        }
        headerRecovery = (byte0 & Self.recoveryBits, byte1, timestamp, length)
        sequenceBase = base
        self.mask = mask
        payload = xor
    }

    /// The missing packet of the group, rebuilt from every other one (`present`, serialized and
    /// with RED taken off) and its sequence number, on `ssrc`; nil when the result cannot be a
    /// packet (its length runs past what this FEC packet protected).
    public func recover(sequenceNumber: UInt16, ssrc: UInt32, from present: [[UInt8]]) -> [UInt8]? {
        var byte0 = headerRecovery.byte0, byte1 = headerRecovery.byte1
        var timestamp = headerRecovery.timestamp, length = headerRecovery.length
        var xor = payload
        for packet in present {
            guard packet.count >= Self.fixedHeaderSize, packet.count - Self.fixedHeaderSize <= xor.count else { return nil }
            byte0 ^= packet[0]
            byte1 ^= packet[1]
            timestamp ^= Self.readUInt32(packet, at: 4)
            length ^= UInt16(truncatingIfNeeded: packet.count - Self.fixedHeaderSize)
            for i in Self.fixedHeaderSize..<packet.count { xor[i - Self.fixedHeaderSize] ^= packet[i] }
        }
        guard Int(length) <= xor.count else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(Self.fixedHeaderSize + Int(length))
        out.append(0x80 | (byte0 & Self.recoveryBits))  // version 2
        out.append(byte1)
        out.writeUInt16(sequenceNumber)
        out.writeUInt32(timestamp)
        out.writeUInt32(ssrc)
        out += xor[0..<Int(length)]
        return out
    }

    private static func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    // MARK: Wire

    public var serializedSize: Int { Self.fecHeaderSize + (isLongMask ? 8 : 4) + payload.count }

    public func serialize(into out: inout [UInt8]) {
        let long = isLongMask
        out.append((long ? Self.lBit : 0) | (headerRecovery.byte0 & Self.recoveryBits))
        out.append(headerRecovery.byte1)
        out.writeUInt16(sequenceBase)
        out.writeUInt32(headerRecovery.timestamp)
        out.writeUInt16(headerRecovery.length)
        out.writeUInt16(UInt16(truncatingIfNeeded: payload.count))
        out.writeUInt16(UInt16(truncatingIfNeeded: mask >> 32))
        if long { out.writeUInt32(UInt32(truncatingIfNeeded: mask)) }
        out += payload
    }

    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(serializedSize)
        serialize(into: &out)
        return out
    }

    public init(parsing bytes: [UInt8]) throws(ParseError) {
        var reader = ByteReader(bytes)
        guard let first = reader.readUInt8(), let byte1 = reader.readUInt8(), let base = reader.readUInt16(),
              let timestamp = reader.readUInt32(), let length = reader.readUInt16() else {
            throw .truncated("ULPFEC", need: Self.fecHeaderSize, have: bytes.count)
        }
        // E = 1 announces a header extension RFC 5109 leaves undefined: not a packet we can use.
        guard first & Self.eBit == 0 else { throw ParseError("ULPFEC", "E bit set (reserved for an extended header)") }
        let long = first & Self.lBit != 0
        guard let protectionLength = reader.readUInt16(), let high = reader.readUInt16() else {
            throw .truncated("ULPFEC", need: Self.fecHeaderSize + 4, have: bytes.count)
        }
        var mask = UInt64(high) << 32
        if long {
            guard let low = reader.readUInt32() else { throw .truncated("ULPFEC", need: Self.fecHeaderSize + 8, have: bytes.count) }
            mask |= UInt64(low)
        }
        guard mask != 0 else { throw ParseError("ULPFEC", "a mask that protects no packet") }
        guard let payload = reader.readBytes(Int(protectionLength)) else {
            throw ParseError("ULPFEC", "protection length \(protectionLength) runs past the \(reader.remaining) bytes left")
        }
        headerRecovery = (first & Self.recoveryBits, byte1, timestamp, length)
        sequenceBase = base
        self.mask = mask
        self.payload = payload
    }
}
