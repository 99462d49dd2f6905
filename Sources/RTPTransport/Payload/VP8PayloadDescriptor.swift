/// The VP8 payload descriptor at the start of every VP8 RTP payload (RFC 7741 §4.2):
///
///          0 1 2 3 4 5 6 7
///         +-+-+-+-+-+-+-+-+
///         |X|R|N|S|R| PID | (required)
///         +-+-+-+-+-+-+-+-+
///     X:  |I|L|T|K| RSV   | (optional)
///         +-+-+-+-+-+-+-+-+
///     I:  |M| PictureID   | (optional; M = 1: 15-bit PictureID over two bytes)
///         +-+-+-+-+-+-+-+-+
///         |   PictureID   |
///         +-+-+-+-+-+-+-+-+
///     L:  |   TL0PICIDX   | (optional)
///         +-+-+-+-+-+-+-+-+
///     T/K:|TID|Y| KEYIDX  | (optional)
///         +-+-+-+-+-+-+-+-+
///
/// N: non-reference frame; S: start of a VP8 partition; PID: partition index.
public struct VP8PayloadDescriptor: Sendable, Equatable {
    public var nonReference = false
    public var startOfPartition = false
    public var partitionIndex: UInt8 = 0
    /// 7- or 15-bit picture ID, when present.
    public var pictureID: UInt16?
    /// Whether the picture ID is written in the 15-bit form (M = 1).
    public var pictureIDIs15Bit = true
    public var tl0PictureIndex: UInt8?
    public var temporalLayer: UInt8?
    public var layerSync = false
    public var keyIndex: UInt8?

    static let xBit: UInt8 = 0x80, nBit: UInt8 = 0x20, sBit: UInt8 = 0x10, pidMask: UInt8 = 0x07
    static let iBit: UInt8 = 0x80, lBit: UInt8 = 0x40, tBit: UInt8 = 0x20, kBit: UInt8 = 0x10
    static let mBit: UInt8 = 0x80

    public init(startOfPartition: Bool = false, partitionIndex: UInt8 = 0, pictureID: UInt16? = nil, nonReference: Bool = false) {
        self.startOfPartition = startOfPartition
        self.partitionIndex = partitionIndex
        self.pictureID = pictureID
        self.nonReference = nonReference
    }

    /// Parses the descriptor and returns it with its size in bytes.
    public static func parse(_ payload: [UInt8]) throws(ParseError) -> (VP8PayloadDescriptor, size: Int) {
        var reader = ByteReader(payload)
        func truncated() -> ParseError { .truncated("VP8 payload descriptor", need: reader.offset + 1, have: payload.count) }
        guard let first = reader.readUInt8() else { throw truncated() }
        var d = VP8PayloadDescriptor()
        d.nonReference = first & nBit != 0
        d.startOfPartition = first & sBit != 0
        d.partitionIndex = first & pidMask
        if first & xBit != 0 {
            guard let x = reader.readUInt8() else { throw truncated() }
            if x & iBit != 0 {
                guard let p = reader.readUInt8() else { throw truncated() }
                if p & mBit != 0 {
                    guard let low = reader.readUInt8() else { throw truncated() }
                    d.pictureID = UInt16(p & 0x7f) << 8 | UInt16(low)
                    d.pictureIDIs15Bit = true
                } else {
                    d.pictureID = UInt16(p)
                    d.pictureIDIs15Bit = false
                }
            }
            if x & lBit != 0 {
                guard let t = reader.readUInt8() else { throw truncated() }
                d.tl0PictureIndex = t
            }
            if x & (tBit | kBit) != 0 {
                guard let tk = reader.readUInt8() else { throw truncated() }
                if x & tBit != 0 {
                    d.temporalLayer = tk >> 6
                    d.layerSync = tk & 0x20 != 0
                }
                if x & kBit != 0 { d.keyIndex = tk & 0x1f }
            }
        }
        guard reader.remaining > 0 else { throw ParseError("VP8 payload", "descriptor with no VP8 data after it") }
        return (d, reader.offset)
    }

    public var serializedSize: Int {
        let hasExtension = pictureID != nil || tl0PictureIndex != nil || temporalLayer != nil || keyIndex != nil
        guard hasExtension else { return 1 }
        return 2 + (pictureID == nil ? 0 : (pictureIDIs15Bit ? 2 : 1)) + (tl0PictureIndex == nil ? 0 : 1)
            + (temporalLayer != nil || keyIndex != nil ? 1 : 0)
    }

    public func serialize(into out: inout [UInt8]) {
        let hasExtension = serializedSize > 1
        out.append((hasExtension ? Self.xBit : 0) | (nonReference ? Self.nBit : 0) | (startOfPartition ? Self.sBit : 0) | (partitionIndex & Self.pidMask))
        guard hasExtension else { return }
        var x: UInt8 = 0
        if pictureID != nil { x |= Self.iBit }
        if tl0PictureIndex != nil { x |= Self.lBit }
        if temporalLayer != nil { x |= Self.tBit }
        if keyIndex != nil { x |= Self.kBit }
        out.append(x)
        if let pictureID {
            if pictureIDIs15Bit {
                out.append(Self.mBit | UInt8((pictureID >> 8) & 0x7f))
                out.append(UInt8(pictureID & 0xff))
            } else {
                out.append(UInt8(pictureID & 0x7f))
            }
        }
        if let tl0PictureIndex { out.append(tl0PictureIndex) }
        if temporalLayer != nil || keyIndex != nil {
            out.append((temporalLayer ?? 0) << 6 | (layerSync ? 0x20 : 0) | ((keyIndex ?? 0) & 0x1f))
        }
    }
}
