import MediaCore

/// One RTP payload of an H.264 stream in packetization mode 1 (RFC 6184 §5.2, Table 3): a
/// single NAL unit, a STAP-A of several, or one FU-A fragment of a unit. STAP-B, MTAP and FU-B
/// belong to the interleaved mode, which is never negotiated here, so they are refused.
public enum H264Payload: Sendable, Equatable {
    case single([UInt8])
    case aggregate([[UInt8]])
    /// `header` is the unit's own header, rebuilt from the FU indicator's F and NRI and the FU
    /// header's type.
    case fragment(header: UInt8, start: Bool, end: Bool, data: [UInt8])

    public init(parsing payload: [UInt8]) throws(ParseError) {
        var reader = ByteReader(payload)
        guard let first = reader.readUInt8() else { throw .truncated("H.264 payload", need: 1, have: 0) }
        switch H264NALUnit.type(of: first) {
        case 1...23:
            self = .single(payload)
        case H264NALUnit.stapA:
            var units: [[UInt8]] = []
            while reader.remaining > 0 {
                guard let size = reader.readUInt16() else {
                    throw .truncated("H.264 STAP-A", need: reader.offset + 2, have: payload.count)
                }
                guard size > 0 else { throw ParseError("H.264 STAP-A", "a unit of size 0 at byte \(reader.offset - 2)") }
                guard let unit = reader.readBytes(Int(size)) else {
                    throw .truncated("H.264 STAP-A", need: reader.offset + Int(size), have: payload.count)
                }
                let type = H264NALUnit.type(of: unit[0])
                guard (1...23).contains(type) else { throw ParseError("H.264 STAP-A", "aggregates a unit of type \(type)") }
                units.append(unit)
            }
            guard !units.isEmpty else { throw ParseError("H.264 STAP-A", "holds no NAL unit") }
            self = .aggregate(units)
        case H264NALUnit.fuA:
            guard let fuHeader = reader.readUInt8() else { throw .truncated("H.264 FU-A", need: 2, have: payload.count) }
            let start = fuHeader & H264FragmentationUnit.startBit != 0
            let end = fuHeader & H264FragmentationUnit.endBit != 0
            // §5.8: a unit in one fragment is sent as a single NAL unit packet instead.
            guard !(start && end) else { throw ParseError("H.264 FU-A", "start and end bits both set") }
            let type = H264NALUnit.type(of: fuHeader)
            guard (1...23).contains(type) else { throw ParseError("H.264 FU-A", "fragments a unit of type \(type)") }
            let header = (first & (H264NALUnit.forbiddenBit | H264NALUnit.nriMask)) | type
            self = .fragment(header: header, start: start, end: end, data: Array(payload[reader.offset...]))
        case let type:
            throw ParseError("H.264 payload", "type \(type) is not used in packetization mode 1 (single NAL unit 1-23, STAP-A 24, FU-A 28)")
        }
    }
}

/// Rebuilds H.264 access units from the RTP payloads of one timestamp (RFC 6184 §5.5, §7.1),
/// tolerating what a network does: packets out of order or twice, packets missing, a payload that
/// does not parse. What cannot be rebuilt is left out whole (never a unit with a hole, which a
/// decoder might misread), and the picture is marked not decodable; from then on the stream
/// waits for an IDR picture, and the caller should ask the sender for one (PLI, RFC 4585 §6.3.1).
///
/// Packets missing before the first or after the last one given are for the caller to know (the
/// jitter buffer sees the marker and the previous frame's end); it says so with `complete`.
public struct H264Depacketizer: Sendable {
    /// An access unit as a decoder wants it.
    public struct AccessUnit: Sendable, Equatable {
        public var units: [[UInt8]]
        /// The picture can be handed to a decoder: nothing of it was lost and every picture it
        /// refers to was decodable (or it is an IDR with its parameter sets).
        public var decodable: Bool
        /// The access unit holds an IDR slice (H.264 §3.69).
        public var isKeyframe: Bool
        /// Annex B bytes for a decoder.
        public var annexB: [UInt8] { H264NALUnit.annexB(units) }
    }

    /// Parameter sets seen so far; an IDR picture cannot be decoded before both.
    public private(set) var hasSequenceParameterSet = false
    public private(set) var hasPictureParameterSet = false
    /// A picture was lost or damaged; pictures until the next IDR cannot be decoded.
    public private(set) var waitingForKeyframe = true

    public init() {}

    /// The access unit carried by `packets` (sequence number and payload, in any order).
    /// `complete` is false when the caller knows packets of this picture are missing at its
    /// start or end.
    public mutating func accessUnit(from packets: [(sequence: UInt16, payload: [UInt8])], complete: Bool = true) -> AccessUnit {
        guard let reference = packets.first?.sequence else {
            return AccessUnit(units: [], decodable: false, isKeyframe: false)
        }
        // Order by distance from the first packet, which handles the 16-bit wrap for a picture
        // of fewer than 32,768 packets.
        let ordered = packets.sorted { Int16(bitPattern: $0.sequence &- reference) < Int16(bitPattern: $1.sequence &- reference) }
        var units: [[UInt8]] = []
        var intact = complete
        var partial: [UInt8]?  // an FU-A unit being gathered
        var previous: UInt16?
        for packet in ordered {
            if let previous {
                if packet.sequence == previous { continue }  // a duplicate
                if packet.sequence != previous &+ 1 {  // a gap: any unit being gathered has a hole
                    intact = false
                    partial = nil
                }
            }
            previous = packet.sequence
            guard let payload = try? H264Payload(parsing: packet.payload) else {
                intact = false
                partial = nil
                continue
            }
            switch payload {
            case .single(let unit):
                if partial != nil { intact = false; partial = nil }
                units.append(unit)
            case .aggregate(let aggregated):
                if partial != nil { intact = false; partial = nil }
                units += aggregated
            case .fragment(let header, let start, let end, let data):
                if start {
                    if partial != nil { intact = false }
                    partial = [header] + data
                } else if partial != nil {
                    partial! += data
                } else {
                    intact = false  // the start of this unit is lost; the rest is useless
                    continue
                }
                if end {
                    units.append(partial!)
                    partial = nil
                }
            }
        }
        if partial != nil { intact = false }  // the unit's last fragment never came
        return judge(units, intact: intact)
    }

    private mutating func judge(_ units: [[UInt8]], intact: Bool) -> AccessUnit {
        var isKeyframe = false, hasSlice = false
        for unit in units {
            switch H264NALUnit.type(of: unit[0]) {
            case H264NALUnit.sequenceParameterSet: hasSequenceParameterSet = true
            case H264NALUnit.pictureParameterSet: hasPictureParameterSet = true
            case H264NALUnit.idrSlice: isKeyframe = true; hasSlice = true
            case 1...4: hasSlice = true
            default: break
            }
        }
        let parameterSets = hasSequenceParameterSet && hasPictureParameterSet
        if !intact || !hasSlice && units.isEmpty {
            waitingForKeyframe = true
        } else if isKeyframe && parameterSets {
            waitingForKeyframe = false
        }
        let decodable = intact && hasSlice && parameterSets && !waitingForKeyframe
        return AccessUnit(units: units, decodable: decodable, isKeyframe: isKeyframe)
    }
}
