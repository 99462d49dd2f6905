/// An RTP packet (RFC 3550 §5.1):
///
///      0                   1                   2                   3
///      0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///     +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///     |V=2|P|X|  CC   |M|     PT      |       sequence number         |
///     +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///     |                           timestamp                           |
///     +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///     |           synchronization source (SSRC) identifier            |
///     +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
///     |            contributing source (CSRC) identifiers             |
///     |                             ....                              |
///     +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///     |      defined by profile       |           length              |   (X = 1, §5.3.1)
///     |                        header extension                       |
///     +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///     |                          payload ...    | padding | pad count |   (P = 1)
///
/// The header extension is kept as its profile and raw words, so parse and serialize are exact
/// inverses; `headerExtensions` reads and writes it as RFC 8285 elements.
public struct RTPPacket: Sendable, Equatable {
    public var marker: Bool
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var csrcs: [UInt32]
    /// "Defined by profile" field of the extension header, or nil when X = 0.
    public var extensionProfile: UInt16?
    /// Extension body, a multiple of 4 bytes.
    public var extensionData: [UInt8]
    public var payload: [UInt8]
    /// Padding after the payload, including the final count byte; empty when P = 0. Kept as
    /// received (RFC 3550 allows any padding content) so serialize reproduces the packet exactly.
    public var padding: [UInt8]

    public var paddingLength: Int { padding.count }

    static let version: UInt8 = 2
    static let fixedHeaderSize = 12
    static let versionShift: UInt8 = 6
    static let paddingBit: UInt8 = 0x20
    static let extensionBit: UInt8 = 0x10
    static let csrcCountMask: UInt8 = 0x0f
    static let markerBit: UInt8 = 0x80
    static let payloadTypeMask: UInt8 = 0x7f

    public init(payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32, marker: Bool = false,
                csrcs: [UInt32] = [], payload: [UInt8] = [], paddingLength: Int = 0) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcs = csrcs
        self.extensionProfile = nil
        self.extensionData = []
        self.payload = payload
        self.padding = paddingLength > 0 ? [UInt8](repeating: 0, count: paddingLength - 1) + [UInt8(min(paddingLength, 255))] : []
    }

    public init(parsing bytes: [UInt8]) throws(ParseError) {
        var reader = ByteReader(bytes)
        guard let first = reader.readUInt8(), let second = reader.readUInt8(), let seq = reader.readUInt16(),
              let ts = reader.readUInt32(), let ssrc = reader.readUInt32() else {
            throw .truncated("RTP header", need: Self.fixedHeaderSize, have: bytes.count)
        }
        guard first >> Self.versionShift == Self.version else {
            throw ParseError("RTP header", "version \(first >> Self.versionShift), expected 2")
        }
        let csrcCount = Int(first & Self.csrcCountMask)
        var csrcs: [UInt32] = []
        for _ in 0..<csrcCount {
            guard let csrc = reader.readUInt32() else {
                throw .truncated("RTP CSRC list", need: Self.fixedHeaderSize + 4 * csrcCount, have: bytes.count)
            }
            csrcs.append(csrc)
        }
        var profile: UInt16?
        var extensionData: [UInt8] = []
        if first & Self.extensionBit != 0 {
            guard let p = reader.readUInt16(), let words = reader.readUInt16() else {
                throw .truncated("RTP extension header", need: reader.offset + 4, have: bytes.count)
            }
            guard let data = reader.readBytes(Int(words) * 4) else {
                throw .truncated("RTP extension", need: reader.offset + Int(words) * 4, have: bytes.count)
            }
            profile = p
            extensionData = data
        }
        var padding = 0
        if first & Self.paddingBit != 0 {
            guard let count = bytes.last, count > 0, Int(count) <= reader.remaining else {
                throw ParseError("RTP padding", "pad count \(bytes.last.map(String.init) ?? "missing") does not fit in \(reader.remaining) payload bytes")
            }
            padding = Int(count)
        }
        self.marker = second & Self.markerBit != 0
        self.payloadType = second & Self.payloadTypeMask
        self.sequenceNumber = seq
        self.timestamp = ts
        self.ssrc = ssrc
        self.csrcs = csrcs
        self.extensionProfile = profile
        self.extensionData = extensionData
        self.payload = Array(bytes[reader.offset..<(bytes.count - padding)])
        self.padding = Array(bytes[(bytes.count - padding)...])
    }

    public var headerSize: Int {
        Self.fixedHeaderSize + 4 * csrcs.count + (extensionProfile == nil ? 0 : 4 + extensionData.count)
    }

    public var serializedSize: Int { headerSize + payload.count + paddingLength }

    public func serialize(into out: inout [UInt8]) {
        var first = Self.version << Self.versionShift | UInt8(csrcs.count & 0x0f)
        if paddingLength > 0 { first |= Self.paddingBit }
        if extensionProfile != nil { first |= Self.extensionBit }
        out.append(first)
        out.append((marker ? Self.markerBit : 0) | (payloadType & Self.payloadTypeMask))
        out.writeUInt16(sequenceNumber)
        out.writeUInt32(timestamp)
        out.writeUInt32(ssrc)
        for csrc in csrcs.prefix(15) { out.writeUInt32(csrc) }
        if let profile = extensionProfile {
            out.writeUInt16(profile)
            out.writeUInt16(UInt16(extensionData.count / 4))
            out += extensionData
        }
        out += payload
        out += padding
    }

    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(serializedSize)
        serialize(into: &out)
        return out
    }
}
