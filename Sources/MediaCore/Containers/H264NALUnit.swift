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

/// What a sender does to a camera's own H.264 access units before packetizing them (RFC 6184
/// wants SPS and PPS with every IDR, and a camera may send them once, at stream start): keeps
/// the latest SPS and PPS, puts them in front of an IDR that lacks them, and says which units
/// are keyframes. A P-picture before the first SPS/PPS/IDR is useless to a peer: `take` returns nil.
public struct H264ParameterSets: Sendable {
    public private(set) var sequence: [UInt8]?
    public private(set) var picture: [UInt8]?
    private var started = false

    public init() {}

    /// The access unit to send (Annex B) and whether it holds an IDR; nil until the stream can be decoded.
    public mutating func take(_ accessUnit: [UInt8]) -> (data: [UInt8], isKeyframe: Bool)? {
        let units = H264NALUnit.units(inAnnexB: accessUnit)
        var hasSPS = false, hasPPS = false, isKeyframe = false
        for unit in units {
            guard let header = unit.first else { continue }
            switch H264NALUnit.type(of: header) {
            case H264NALUnit.sequenceParameterSet: sequence = Array(unit); hasSPS = true
            case H264NALUnit.pictureParameterSet: picture = Array(unit); hasPPS = true
            case H264NALUnit.idrSlice: isKeyframe = true
            default: break
            }
        }
        guard isKeyframe || started else { return nil }
        guard isKeyframe else { return (accessUnit, false) }
        guard let sequence, let picture else { return nil }
        started = true
        if hasSPS && hasPPS { return (accessUnit, true) }
        let slices = units.filter { unit in unit.first.map { [H264NALUnit.sequenceParameterSet, H264NALUnit.pictureParameterSet].contains(H264NALUnit.type(of: $0)) } == false }
        return (H264NALUnit.annexB([sequence[...], picture[...]] + slices), true)
    }
}
