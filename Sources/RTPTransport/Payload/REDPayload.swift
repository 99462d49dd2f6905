/// RTP payload for redundant audio (RFC 2198), as libwebrtc carries Opus in it ("red/48000/2",
/// fmtp "111/111"): earlier packets' payloads ride ahead of the new one, so a lost packet is
/// rebuilt from the next one that arrives, with no round trip.
///
/// Wire form: one 4-byte header per redundant block (F = 1, block payload type, timestamp offset
/// from the packet's own timestamp in 14 bits, block length in 10 bits), then a 1-byte header
/// for the primary block (F = 0, its payload type); then the blocks' data in the same order,
/// the primary last.
public struct REDPayload: Sendable, Equatable {
    public struct Block: Sendable, Equatable {
        public var payloadType: UInt8
        /// How much earlier than the packet's own timestamp this block's audio begins.
        public var timestampOffset: UInt32
        public var data: [UInt8]
        public init(payloadType: UInt8, timestampOffset: UInt32, data: [UInt8]) {
            (self.payloadType, self.timestampOffset, self.data) = (payloadType, timestampOffset, data)
        }
    }

    /// Oldest first.
    public var redundant: [Block]
    public var primaryPayloadType: UInt8
    public var primary: [UInt8]

    /// What the header's fields can say: offsets of 14 bits, lengths of 10.
    public static let maxTimestampOffset: UInt32 = (1 << 14) - 1
    public static let maxBlockLength = (1 << 10) - 1

    public init(redundant: [Block], primaryPayloadType: UInt8, primary: [UInt8]) {
        (self.redundant, self.primaryPayloadType, self.primary) = (redundant, primaryPayloadType, primary)
    }

    /// Blocks whose offset or length the header cannot hold are left out (the receiver then
    /// conceals that packet, as it would without RED).
    public func serialized() -> [UInt8] {
        let blocks = redundant.filter { $0.timestampOffset <= Self.maxTimestampOffset && $0.data.count <= Self.maxBlockLength && $0.payloadType < 128 }
        var out: [UInt8] = []
        out.reserveCapacity(blocks.count * 4 + 1 + blocks.reduce(0) { $0 + $1.data.count } + primary.count)
        for block in blocks {
            let length = UInt32(block.data.count)
            out.append(0x80 | block.payloadType)
            let rest = block.timestampOffset << 10 | length
            out += [UInt8(truncatingIfNeeded: rest >> 16), UInt8(truncatingIfNeeded: rest >> 8), UInt8(truncatingIfNeeded: rest)]
        }
        out.append(primaryPayloadType & 0x7f)
        for block in blocks { out += block.data }
        out += primary
        return out
    }

    public init(parsing bytes: [UInt8]) throws(ParseError) {
        var headers: [(payloadType: UInt8, offset: UInt32, length: Int)] = []
        var i = 0
        while true {
            guard i < bytes.count else { throw ParseError("RED", "the block headers run past the payload (\(bytes.count) bytes)") }
            let first = bytes[i]
            if first & 0x80 == 0 {
                primaryPayloadType = first
                i += 1
                break
            }
            guard i + 4 <= bytes.count else { throw ParseError("RED", "a redundant block's header is cut short at byte \(i)") }
            let rest = UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
            headers.append((first & 0x7f, rest >> 10, Int(rest & 0x3ff)))
            i += 4
            // 1500 bytes hold fewer than 400 headers; more is not a packet anyone sent.
            guard headers.count <= 64 else { throw ParseError("RED", "more than 64 redundant blocks") }
        }
        var blocks: [Block] = []
        for header in headers {
            guard header.length <= bytes.count - i else {
                throw ParseError("RED", "a redundant block of \(header.length) bytes runs past the payload")
            }
            blocks.append(Block(payloadType: header.payloadType, timestampOffset: header.offset, data: Array(bytes[i..<i + header.length])))
            i += header.length
        }
        redundant = blocks
        primary = Array(bytes[i...])
    }
}

/// Which of the last 64 sequence numbers (by the newest) have been seen: what RED's receiver
/// asks before rebuilding a packet from a redundant block. Older ones count as seen.
public struct RecentSequences: Sendable, Equatable {
    private var newest: UInt16?
    /// Bit k: newest - k was seen.
    private var seen: UInt64 = 0

    public init() {}

    public mutating func insert(_ sequence: UInt16) {
        guard let newest else {
            self.newest = sequence
            seen = 1
            return
        }
        let ahead = Int16(bitPattern: sequence &- newest)
        if ahead > 0 {
            seen = ahead >= 64 ? 1 : seen << UInt64(ahead) | 1
            self.newest = sequence
        } else if -Int(ahead) < 64 {
            seen |= 1 << UInt64(-Int(ahead))
        }
    }

    public func contains(_ sequence: UInt16) -> Bool {
        guard let newest else { return false }
        let behind = Int16(bitPattern: newest &- sequence)
        if behind < 0 { return false }
        return behind >= 64 || seen & (1 << UInt64(behind)) != 0
    }
}
