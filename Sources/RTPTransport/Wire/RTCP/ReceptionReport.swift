/// One report block of an SR or RR (RFC 3550 §6.4.1):
///
///     |                 SSRC_n (source identifier)                    |
///     | fraction lost |       cumulative number of packets lost       |
///     |           extended highest sequence number received           |
///     |                      interarrival jitter                      |
///     |                         last SR (LSR)                         |
///     |                   delay since last SR (DLSR)                  |
public struct ReceptionReport: Sendable, Equatable {
    public var ssrc: UInt32
    /// Fraction of packets lost since the last report, in 1/256 units.
    public var fractionLost: UInt8
    /// Cumulative packets lost (24-bit signed: duplicates can make it negative).
    public var cumulativeLost: Int32
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP timestamp of the last SR received from this source.
    public var lastSenderReport: UInt32
    /// Delay since that SR, in 1/65536 s.
    public var delaySinceLastSenderReport: UInt32

    static let size = 24

    public init(ssrc: UInt32, fractionLost: UInt8 = 0, cumulativeLost: Int32 = 0, extendedHighestSequence: UInt32 = 0,
                jitter: UInt32 = 0, lastSenderReport: UInt32 = 0, delaySinceLastSenderReport: UInt32 = 0) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    init(reader: inout ByteReader) throws(ParseError) {
        guard let ssrc = reader.readUInt32(), let fraction = reader.readUInt8(), let lost = reader.readUInt24(),
              let highest = reader.readUInt32(), let jitter = reader.readUInt32(), let lsr = reader.readUInt32(),
              let dlsr = reader.readUInt32() else {
            throw ParseError("RTCP report block", "truncated: a block is 24 bytes")
        }
        self.ssrc = ssrc
        self.fractionLost = fraction
        // Sign-extend the 24-bit field.
        self.cumulativeLost = Int32(bitPattern: lost << 8) >> 8
        self.extendedHighestSequence = highest
        self.jitter = jitter
        self.lastSenderReport = lsr
        self.delaySinceLastSenderReport = dlsr
    }

    func serialize(into out: inout [UInt8]) {
        out.writeUInt32(ssrc)
        out.append(fractionLost)
        out.writeUInt24(UInt32(bitPattern: max(-0x80_0000, min(0x7f_ffff, cumulativeLost))) & 0xff_ffff)
        out.writeUInt32(extendedHighestSequence)
        out.writeUInt32(jitter)
        out.writeUInt32(lastSenderReport)
        out.writeUInt32(delaySinceLastSenderReport)
    }
}
