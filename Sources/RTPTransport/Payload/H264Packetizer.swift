import MediaCore

/// Splits H.264 access units into RTP payloads in packetization mode 1 (RFC 6184 §6.3, the mode
/// every WebRTC stack offers): a NAL unit that fits goes alone (§5.6), consecutive small units
/// share a STAP-A (§5.7.1), and a unit too large for one packet is cut into FU-A fragments
/// (§5.8), balanced like VP8's payloads. The caller sets the marker on the last packet (§5.1).
///
/// Every IDR picture leaves with the sequence and picture parameter sets before it, even when
/// the encoder wrote them only once, so a receiver that joins late or lost the first keyframe
/// can decode the next one (libwebrtc and GStreamer's `config-interval=-1` do the same). Access
/// unit delimiters are dropped: RTP's timestamp and marker already delimit access units.
public struct H264Packetizer: Sendable {
    public let maxPayloadSize: Int
    /// The last sequence and picture parameter sets seen, repeated before an IDR that lacks them.
    /// One of each: the encoders this code drives (OpenH264, V4L2 cameras and M2M encoders)
    /// keep to parameter set id 0.
    public private(set) var sequenceParameterSet: [UInt8]?
    public private(set) var pictureParameterSet: [UInt8]?

    static let fuHeaderSize = 2  // FU indicator + FU header
    static let stapLengthSize = 2

    public init(maxPayloadSize: Int = VP8Packetizer.defaultMaxPayloadSize) {
        precondition(maxPayloadSize > Self.fuHeaderSize + 1, "room for an FU-A header and data")
        self.maxPayloadSize = maxPayloadSize
    }

    /// Payloads for one access unit given as an Annex B stream (what OpenH264 and V4L2 encoders
    /// emit).
    public mutating func packetize(annexB accessUnit: [UInt8]) -> [[UInt8]] {
        packetize(units: H264NALUnit.units(inAnnexB: accessUnit))
    }

    /// Payloads for one access unit given as its NAL units, in decoding order.
    public mutating func packetize(units given: [ArraySlice<UInt8>]) -> [[UInt8]] {
        let units = withParameterSets(given.filter { !$0.isEmpty && H264NALUnit.type(of: $0.first!) != H264NALUnit.accessUnitDelimiter })
        var payloads: [[UInt8]] = []
        var index = 0
        while index < units.count {
            let unit = units[index]
            guard unit.count <= maxPayloadSize else {
                payloads += fragments(of: unit)
                index += 1
                continue
            }
            // Gather the units after it that fit in one STAP-A beside it.
            var end = index + 1
            var size = 1 + Self.stapLengthSize + unit.count
            while end < units.count, size + Self.stapLengthSize + units[end].count <= maxPayloadSize {
                size += Self.stapLengthSize + units[end].count
                end += 1
            }
            payloads.append(end - index == 1 ? Array(unit) : aggregate(units[index..<end]))
            index = end
        }
        return payloads
    }

    /// Remembers parameter sets and puts them before an IDR slice that comes without them.
    private mutating func withParameterSets(_ units: [ArraySlice<UInt8>]) -> [ArraySlice<UInt8>] {
        var hasSPS = false, hasPPS = false
        var out: [ArraySlice<UInt8>] = []
        out.reserveCapacity(units.count + 2)
        for unit in units {
            switch H264NALUnit.type(of: unit.first!) {
            case H264NALUnit.sequenceParameterSet:
                sequenceParameterSet = Array(unit)
                hasSPS = true
            case H264NALUnit.pictureParameterSet:
                pictureParameterSet = Array(unit)
                hasPPS = true
            case H264NALUnit.idrSlice where !(hasSPS && hasPPS):
                if !hasSPS, let sps = sequenceParameterSet { out.append(sps[...]) }
                if !hasPPS, let pps = pictureParameterSet { out.append(pps[...]) }
                hasSPS = true
                hasPPS = true
            default:
                break
            }
            out.append(unit)
        }
        return out
    }

    /// A STAP-A (RFC 6184 §5.7.1): a header whose F is the OR and NRI the highest of its units',
    /// then each unit after its 16-bit size.
    ///
    ///      |STAP-A NAL HDR | NALU 1 Size | NALU 1 HDR & Data | NALU 2 Size | ...
    private func aggregate(_ units: ArraySlice<ArraySlice<UInt8>>) -> [UInt8] {
        var forbidden: UInt8 = 0, nri: UInt8 = 0
        for unit in units {
            forbidden |= unit.first! & H264NALUnit.forbiddenBit
            nri = max(nri, unit.first! & H264NALUnit.nriMask)
        }
        var payload: [UInt8] = [forbidden | nri | H264NALUnit.stapA]
        for unit in units {
            payload.writeUInt16(UInt16(unit.count))
            payload += unit
        }
        return payload
    }

    /// FU-A fragments (RFC 6184 §5.8): the unit's header is split between the FU indicator (F,
    /// NRI, type 28) and the FU header (start, end, the unit's type); its body follows in parts.
    ///
    ///      | FU indicator |S|E|R| Type | FU payload ...
    private func fragments(of unit: ArraySlice<UInt8>) -> [[UInt8]] {
        let header = unit.first!
        let indicator = (header & (H264NALUnit.forbiddenBit | H264NALUnit.nriMask)) | H264NALUnit.fuA
        let body = unit.dropFirst()
        let room = maxPayloadSize - Self.fuHeaderSize
        let count = (body.count + room - 1) / room
        let base = body.count / count, extra = body.count % count
        var payloads: [[UInt8]] = []
        payloads.reserveCapacity(count)
        var offset = body.startIndex
        for index in 0..<count {
            let size = base + (index < extra ? 1 : 0)
            var fuHeader = H264NALUnit.type(of: header)
            if index == 0 { fuHeader |= H264FragmentationUnit.startBit }
            if index == count - 1 { fuHeader |= H264FragmentationUnit.endBit }
            var payload: [UInt8] = [indicator, fuHeader]
            payload.reserveCapacity(Self.fuHeaderSize + size)
            payload += body[offset..<(offset + size)]
            payloads.append(payload)
            offset += size
        }
        return payloads
    }
}

enum H264FragmentationUnit {
    static let startBit: UInt8 = 0x80
    static let endBit: UInt8 = 0x40
    static let reservedBit: UInt8 = 0x20
}
