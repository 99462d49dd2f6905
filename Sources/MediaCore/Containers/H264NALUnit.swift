/// What an H.264 stream is made of: NAL units (ITU-T H.264 §7.3.1), each opened by a one-byte
/// header that RFC 6184 §1.3 reuses as the payload header of every RTP packet:
///
///      +---------------+
///      |0|1|2|3|4|5|6|7|
///      +-+-+-+-+-+-+-+-+
///      |F|NRI|  Type   |
///      +---------------+
///
/// F: forbidden zero bit (1 marks a unit known to be damaged); NRI: how much the unit matters to
/// the pictures that follow (0: not a reference); Type: 1-23 a NAL unit, 24-29 RTP aggregation
/// and fragmentation units.
public enum H264NALUnit {
    /// NAL unit types this code acts on (H.264 Table 7-1, RFC 6184 Table 1).
    public static let nonIDRSlice: UInt8 = 1
    public static let idrSlice: UInt8 = 5
    public static let sei: UInt8 = 6
    public static let sequenceParameterSet: UInt8 = 7
    public static let pictureParameterSet: UInt8 = 8
    public static let accessUnitDelimiter: UInt8 = 9
    public static let stapA: UInt8 = 24
    public static let fuA: UInt8 = 28

    public static let typeMask: UInt8 = 0x1f
    public static let nriMask: UInt8 = 0x60
    public static let forbiddenBit: UInt8 = 0x80

    /// The type of a NAL unit (or RTP payload) from its first byte.
    public static func type(of header: UInt8) -> UInt8 { header & typeMask }

    /// The NAL units of an Annex B byte stream (H.264 Annex B: each unit after a 00 00 01 start
    /// code, which may carry a leading zero byte), without their start codes. Bytes before the
    /// first start code are not a unit and are skipped; a stream without a start code is taken as
    /// one unit, which is how an encoder hands over a single NAL unit.
    public static func units(inAnnexB stream: [UInt8]) -> [ArraySlice<UInt8>] {
        var starts: [(code: Int, body: Int)] = []
        var index = 0
        while index + 2 < stream.count {
            if stream[index] == 0, stream[index + 1] == 0, stream[index + 2] == 1 {
                starts.append((index, index + 3))
                index += 3
            } else {
                index += 1
            }
        }
        guard !starts.isEmpty else { return stream.isEmpty ? [] : [stream[...]] }
        var units: [ArraySlice<UInt8>] = []
        for (n, start) in starts.enumerated() {
            var end = n + 1 < starts.count ? starts[n + 1].code : stream.count
            // Zero bytes before the next start code are its leading zero (or trailing zeros,
            // H.264 B.1.1), not part of this unit.
            while end > start.body, stream[end - 1] == 0, n + 1 < starts.count { end -= 1 }
            if end > start.body { units.append(stream[start.body..<end]) }
        }
        return units
    }

    /// NAL units written as an Annex B stream with four-byte start codes, which every decoder
    /// reads (ffmpeg, OpenH264, V4L2 decoders).
    public static func annexB<S: Sequence>(_ units: S) -> [UInt8] where S.Element: Collection, S.Element.Element == UInt8 {
        var stream: [UInt8] = []
        for unit in units {
            stream += [0, 0, 0, 1]
            stream += unit
        }
        return stream
    }
}
