import MediaCore
import Platform
/// Collects video RTP packets and hands out complete VP8 or H.264 frames in decode order. Pure:
/// arrival and `now` are passed in.
///
/// - A frame is complete when its first packet, its last (marker) and every sequence number
///   between them have arrived, in any order. VP8 marks the first packet (S = 1, PID = 0);
///   H.264 does not (RFC 6184 §5.1), so there a packet starts a frame when it follows the last
///   frame released, or the packet before it has another timestamp; with the packet before it
///   missing, only when the frame it opens decodes on its own: an IDR with its parameter sets,
///   as every IDR is sent (`H264Packetizer`, libwebrtc, GStreamer's config-interval). An H.264
///   frame comes out as an Annex B access unit (`H264Depacketizer`).
/// - A frame is released as soon as it is complete and continues the previous one (its first
///   sequence number follows the previous frame's last, or its VP8 picture ID follows the
///   previous frame's: the sequence numbers between are FEC, not media), or it is a keyframe.
/// - When the next frame is incomplete, the buffer waits up to `targetDelay` for reordered or
///   retransmitted packets, then gives up on it: frames up to the next complete keyframe are
///   dropped and `keyframeNeeded` is set so the caller sends a PLI.
/// - `targetDelay` adapts: three times the measured frame jitter (RFC 3550 §A.8 estimator) plus
///   the round-trip time a retransmission needs, within `minimumDelay ... maximumDelay`.
/// - With a `playoutDelay`, a frame is also held until its render time: when its RTP timestamp
///   says it was taken, on the clock of the packet that came fastest lately, plus the delay. A
///   frame whose repair took less than the delay then shows on time, and one that took longer
///   shows that much late rather than its whole repair late: with the delay at one NACK round
///   trip, a hole that needs two or three rounds stays under a freeze.
/// - Memory is bounded: past `maxPackets` the oldest frames are dropped.
public struct VideoJitterBuffer: Sendable {
    public struct Frame: Sendable, Equatable {
        public var data: [UInt8]
        public var rtpTimestamp: UInt32
        public var isKeyframe: Bool
        public var firstSequence: Int64
        public var lastSequence: Int64
        /// When the frame's last missing packet arrived.
        public var completedAt: Duration
        /// The VP8 picture ID (RFC 7741 §4.2), when the sender numbers its pictures.
        public var pictureID: PictureID? = nil
        /// H.264: the picture's `frame_num` and whether it is a reference (`H264Syntax`), when
        /// the frame starts at its picture's first slice and the sequence's parameters are known.
        public var frameNumber: FrameNumber? = nil
        /// H.264: the width of `frame_num` this frame's own sequence parameter set gives.
        var frameNumberBits: Int? = nil
    }

    /// An H.264 picture's `frame_num` (H.264 §7.4.3) and whether later pictures refer to it.
    public struct FrameNumber: Sendable, Equatable {
        public var value: Int
        public var isReference: Bool
        public var bits: Int
        /// The number the next picture carries: one more after a reference picture, the same
        /// after a non-reference one.
        public var next: Int { isReference ? (value + 1) % (1 << bits) : value }
    }

    /// A VP8 picture ID and its width (7 or 15 bits), which says where it wraps.
    public struct PictureID: Sendable, Equatable {
        public var value: UInt16
        public var is15Bit: Bool
        public init(value: UInt16, is15Bit: Bool) { (self.value, self.is15Bit) = (value, is15Bit) }
        /// The next picture's ID.
        public var next: PictureID { PictureID(value: (value &+ 1) & (is15Bit ? 0x7fff : 0x7f), is15Bit: is15Bit) }
    }

    public enum InsertResult: Sendable, Equatable {
        case inserted, duplicate, late, invalid
    }

    struct Packet {
        /// VP8: the frame's bytes after the payload descriptor. H.264: the whole payload.
        var data: [UInt8]
        /// VP8's S bit with partition 0 (H.264 has none: see `startsFrame`).
        var isFrameStart: Bool
        /// VP8: the first packet of a keyframe. H.264: a packet that may open one, its first unit
        /// a delimiter, SEI, parameter set or the start of an IDR slice.
        var isKeyframeStart: Bool
        /// H.264: a packet that opens a picture: a delimiter, SEI or parameter set first, or the
        /// start of a picture's first slice (`first_mb_in_slice` 0).
        var opensPicture = false
        var pictureID: PictureID?
        var sequenceNumber: UInt16
        var marker: Bool
        var timestamp: UInt32
        var arrival: Duration
    }

    static let startupReorderingGrace: Duration = .milliseconds(10)

    public let format: VideoPayloadFormat
    public let clockRate: Double
    public let maxPackets: Int
    public var minimumDelay: Duration
    public var maximumDelay: Duration
    /// How long repairing a hole by retransmission may take (a few NACK attempts, each a round
    /// trip), so the buffer does not give up on a frame that a resend is about to complete.
    public var retransmissionWait: Duration = .zero
    /// How long after its render time's base a frame is shown at the earliest (zero: as soon as
    /// it is complete).
    public var playoutDelay: Duration = .zero

    private var unwrapper = SequenceUnwrapper()
    private var packets: [Int64: Packet] = [:]
    /// Sequence numbers of the keyframes' first packets among `packets`.
    private var keyframeStarts: Set<Int64> = []
    /// Last sequence number of the last frame released (or skipped past).
    private var lastReleased: Int64?
    /// The picture ID of the last frame released (nil when it had none, or frames were skipped past).
    private var lastPictureID: PictureID?
    /// H.264: the last released picture's frame_num, and the width the stream's sequence
    /// parameter set gives it.
    private var lastFrameNumber: FrameNumber?
    private var lastReleasedTimestamp: UInt32?
    private var frameNumberBits: Int?
    /// Since when the oldest pending frame has been waiting.
    private var waitingSince: Duration?
    private var jitter = 0.0
    private var lastTransit: Double?
    /// The packet that came fastest (the smallest arrival minus its RTP time) in this window and
    /// the one before (5 s each): render times are reckoned from it, and it follows a path that
    /// grew longer within 10 s.
    private var fastest: (current: (arrival: Duration, timestamp: UInt32)?, previous: (arrival: Duration, timestamp: UInt32)?, windowStart: Duration?)
        = (nil, nil, nil)
    static let fastestWindow: Duration = .seconds(5)

    /// How late each recent frame was complete after its render time's base (its RTP time on
    /// the fastest packet's clock), over the last `latenessWindow`: what a playout delay would
    /// have to cover for those frames to show evenly.
    private var lateness: [(at: Duration, late: Duration)] = []
    static let latenessWindow: Duration = .seconds(10)

    /// When the link last held the stream (see `noteHold`), over the last `holdMemory`.
    private var holds: [Duration] = []
    /// The newest media seen: its arrival and RTP time (retransmissions of older pictures are
    /// not the stream's pace).
    private var newest: (arrival: Duration, timestamp: UInt32)?
    /// A hold: nothing new for this much longer than the pictures' own spacing (a cellular
    /// scheduler's gap or outage; a sender that pauses or skips pictures spaces their RTP times
    /// too, and is no hold).
    public static let holdLength: Duration = .milliseconds(100)
    public static let holdMemory: Duration = .seconds(30)

    public private(set) var keyframeNeeded = false
    public private(set) var framesReleased = 0
    public private(set) var framesDropped = 0
    public private(set) var latePackets = 0
    public private(set) var duplicatePackets = 0

    public init(format: VideoPayloadFormat = .vp8, clockRate: Double = 90_000, maxPackets: Int = 4000,
                minimumDelay: Duration = .milliseconds(10), maximumDelay: Duration = .milliseconds(500)) {
        self.format = format
        self.clockRate = clockRate
        self.maxPackets = maxPackets
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
    }

    /// Interarrival jitter in seconds.
    public var jitterSeconds: Double { jitter }

    public var targetDelay: Duration {
        let wanted = Duration.seconds(3 * jitter) + retransmissionWait
        return min(maximumDelay, max(minimumDelay, wanted))
    }

    public var packetCount: Int { packets.count }

    public mutating func clearKeyframeRequest() { keyframeNeeded = false }

    public mutating func insert(_ packet: RTPPacket, arrival: Duration) -> InsertResult {
        guard let parsed = Self.parse(packet, format, arrival: arrival) else { return .invalid }
        let sequence = unwrapper.unwrap(packet.sequenceNumber)
        if let lastReleased, sequence <= lastReleased {
            latePackets += 1
            return .late
        }
        guard packets[sequence] == nil else {
            duplicatePackets += 1
            return .duplicate
        }
        updateJitter(rtpTimestamp: packet.timestamp, arrival: arrival)
        noteTransit(rtpTimestamp: packet.timestamp, arrival: arrival)
        noteHold(rtpTimestamp: packet.timestamp, arrival: arrival)
        packets[sequence] = parsed
        if parsed.isKeyframeStart { keyframeStarts.insert(sequence) }
        if packets.count > maxPackets { dropOldestFrame() }
        return .inserted
    }

    /// What the buffer keeps of a packet; nil for a payload that does not parse.
    static func parse(_ packet: RTPPacket, _ format: VideoPayloadFormat, arrival: Duration) -> Packet? {
        switch format {
        case .vp8:
            guard let fragment = try? VP8PayloadFragment(parsing: packet.payload) else { return nil }
            let pictureID = fragment.descriptor.pictureID.map { PictureID(value: $0, is15Bit: fragment.descriptor.pictureIDIs15Bit) }
            return Packet(data: fragment.data, isFrameStart: fragment.isFrameStart, isKeyframeStart: fragment.isKeyframeStart,
                          pictureID: pictureID, sequenceNumber: packet.sequenceNumber, marker: packet.marker,
                          timestamp: packet.timestamp, arrival: arrival)
        case .h264:
            guard let payload = try? H264Payload(parsing: packet.payload) else { return nil }
            // The unit the packet opens with (the start of one, for a fragment), if any.
            let openingUnit: [UInt8]?
            switch payload {
            case .single(let unit): openingUnit = unit
            case .aggregate(let units): openingUnit = units[0]
            case .fragment(let header, let start, _, let data): openingUnit = start ? [header] + data.prefix(16) : nil
            }
            let opening = openingUnit.map { H264NALUnit.type(of: $0[0]) }
            let mayOpenKeyframe = opening.map { [H264NALUnit.accessUnitDelimiter, H264NALUnit.sei, H264NALUnit.sequenceParameterSet,
                                                 H264NALUnit.pictureParameterSet, H264NALUnit.idrSlice].contains($0) } ?? false
            let firstSlice = openingUnit.flatMap { H264Syntax.sliceStart($0, frameNumberBits: nil) }?.firstMacroblock == 0
            let opensPicture = firstSlice || (mayOpenKeyframe && opening != H264NALUnit.idrSlice)
            return Packet(data: packet.payload, isFrameStart: false, isKeyframeStart: mayOpenKeyframe, opensPicture: opensPicture, pictureID: nil,
                          sequenceNumber: packet.sequenceNumber, marker: packet.marker, timestamp: packet.timestamp, arrival: arrival)
        }
    }

    /// RFC 3550 §A.8 on packet transit times, in seconds; packets of one frame share a timestamp,
    /// so their spread counts as jitter, which is what the wait has to cover.
    private mutating func updateJitter(rtpTimestamp: UInt32, arrival: Duration) {
        let arrivalSeconds = arrival.inSeconds
        let transit = arrivalSeconds - Double(rtpTimestamp) / clockRate
        if let lastTransit {
            var d = abs(transit - lastTransit)
            // A timestamp wrap (every 13 hours at 90 kHz) looks like a huge jump: ignore it.
            if d > 10 { d = 0 }
            jitter += (d - jitter) / 16
        }
        lastTransit = transit
    }

    private mutating func noteHold(rtpTimestamp: UInt32, arrival: Duration) {
        if let newest {
            let spacing = Int32(bitPattern: rtpTimestamp &- newest.timestamp)
            guard spacing >= 0 else { return }
            if arrival - newest.arrival - .seconds(Double(spacing) / clockRate) >= Self.holdLength { holds.append(arrival) }
        }
        newest = (arrival, rtpTimestamp)
        holds.removeAll { arrival - $0 > Self.holdMemory }
    }

    /// How many times the link held the stream for `holdLength` or more in the last
    /// `holdMemory` before `now`.
    public func recentHolds(now: Duration) -> Int {
        holds.count { now - $0 <= Self.holdMemory }
    }

    /// Whether `a` came faster than `b`: less time after its RTP time.
    private func faster(_ a: (arrival: Duration, timestamp: UInt32), than b: (arrival: Duration, timestamp: UInt32)) -> Bool {
        let taken = Duration.seconds(Double(Int32(bitPattern: a.timestamp &- b.timestamp)) / clockRate)
        return a.arrival - taken < b.arrival
    }

    private mutating func noteTransit(rtpTimestamp: UInt32, arrival: Duration) {
        let packet = (arrival: arrival, timestamp: rtpTimestamp)
        if let start = fastest.windowStart, arrival - start >= Self.fastestWindow {
            fastest = (nil, fastest.current, arrival)
        }
        if fastest.windowStart == nil { fastest.windowStart = arrival }
        if fastest.current.map({ faster(packet, than: $0) }) ?? true { fastest.current = packet }
    }

    /// When the frame of `timestamp` is due to show: its RTP time on the fastest packet's clock,
    /// plus the playout delay. Nil without a delay (or before any packet).
    public func renderTime(_ timestamp: UInt32) -> Duration? {
        guard playoutDelay > .zero else { return nil }
        return renderBase(timestamp).map { $0 + playoutDelay }
    }

    /// A frame's RTP time on the fastest packet's clock (nil before any packet).
    private func renderBase(_ timestamp: UInt32) -> Duration? {
        guard let current = fastest.current else { return nil }
        let base = fastest.previous.map { faster($0, than: current) ? $0 : current } ?? current
        return base.arrival + .seconds(Double(Int32(bitPattern: timestamp &- base.timestamp)) / clockRate)
    }

    /// The lateness (see `lateness`) that the fraction `q` of recent frames did not exceed.
    public func recentLateness(_ q: Double) -> Duration {
        guard !lateness.isEmpty else { return .zero }
        let sorted = lateness.map(\.late).sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
    }

    /// When the next frame, complete and in order, waits only for its render time: the caller
    /// comes back then.
    public private(set) var heldUntil: Duration?

    /// Frames ready at `now`, in decode order.
    public mutating func popFrames(now: Duration) -> [Frame] {
        heldUntil = nil
        var out: [Frame] = []
        while let frame = nextFrame(now: now) { out.append(frame) }
        return out
    }

    private mutating func nextFrame(now: Duration) -> Frame? {
        guard let oldest = packets.keys.min() else {
            waitingSince = nil
            return nil
        }
        if let frame = completeFrame(startingAt: oldest, now: now), frame.isKeyframe || continues(frame) {
            if lastReleased != nil, let due = renderTime(frame.rtpTimestamp), now < due {
                heldUntil = due
                return nil
            }
            release(frame)
            return frame
        }
        // Nothing decoded yet and the stream did not start at a keyframe (its first packets were
        // lost, or we joined late): no NACK can name packets before the first one seen, so ask
        // for a keyframe at once, and take the first complete one that comes.
        if lastReleased == nil {
            if let keyframe = nextCompleteKeyframe(now: now) {
                framesDropped += Set(packets.keys.filter { $0 < keyframe.firstSequence }.compactMap { packets[$0]?.timestamp }).count
                release(keyframe)
                return keyframe
            }
            // A reordered first packet is not a loss: allow a moment before asking. A first
            // keyframe still arriving (a pacer spreads a large one over tens of milliseconds) or
            // being repaired gets as long as any other frame before it is given up.
            if let first = packets[oldest] {
                let grace = first.isKeyframeStart ? max(Self.startupReorderingGrace, targetDelay) : Self.startupReorderingGrace
                if now - first.arrival >= grace { keyframeNeeded = true }
            }
            return nil
        }
        // The next frame is not ready: wait, then skip to a complete keyframe; at once when one
        // is already here (decoding starts over at it: what is before it would only show late).
        let since = waitingSince ?? (packets[oldest]?.arrival ?? now)
        waitingSince = since
        let keyframe = nextCompleteKeyframe(now: now)
        guard now - since >= targetDelay || keyframe != nil else { return nil }
        guard let keyframe else {
            keyframeNeeded = true
            return nil
        }
        let skipped = Set(packets.keys.filter { $0 < keyframe.firstSequence }.compactMap { packets[$0]?.timestamp })
        framesDropped += skipped.count
        keyframeNeeded = true
        release(keyframe)
        return keyframe
    }

    private func continues(_ frame: Frame) -> Bool {
        guard let lastReleased else { return false }  // the first frame must be a keyframe
        if frame.firstSequence == lastReleased + 1 { return true }
        // H.264 has no picture ID, but a picture's frame_num says whether a reference picture
        // was lost before it (the numbers between are then FEC, or a picture no one refers to).
        if format == .h264 {
            guard let last = lastFrameNumber, let number = frame.frameNumber, number.bits == last.bits else { return false }
            return number.value == last.next
        }
        // Only sequence numbers that are no frame's lie between two pictures numbered in a row:
        // the previous frame ended with its marker, and this one starts at its first partition.
        guard let lastPictureID, let id = frame.pictureID else { return false }
        return id == lastPictureID.next
    }

    private mutating func release(_ frame: Frame) {
        if let base = renderBase(frame.rtpTimestamp) {
            lateness.append((frame.completedAt, max(.zero, frame.completedAt - base)))
            if let first = lateness.first, frame.completedAt - first.at > Self.latenessWindow {
                lateness.removeFirst(lateness.prefix { frame.completedAt - $0.at > Self.latenessWindow }.count)
            }
        }
        for sequence in packets.keys where sequence <= frame.lastSequence { packets[sequence] = nil }
        keyframeStarts = keyframeStarts.filter { $0 > frame.lastSequence }
        lastReleased = frame.lastSequence
        lastReleasedTimestamp = frame.rtpTimestamp
        lastPictureID = frame.pictureID
        lastFrameNumber = frame.frameNumber
        if let bits = frame.frameNumberBits { frameNumberBits = bits }
        waitingSince = nil
        framesReleased += 1
    }

    /// H.264: the sequence numbers just before `sequenceNumber` (a packet just inserted) that no
    /// picture needs, so the caller asks for none of them. VP8 needs no such call: its FEC is
    /// never resent, and its frames follow by picture ID.
    /// - An FEC packet (`fecTimestamp`): a picture's FEC takes the numbers right after its
    ///   packets (`FECProtector`), so with that picture's marker packet here, the numbers between
    ///   the marker and this one are its FEC too.
    /// - A packet that opens the picture following the last one released, by its frame_num: the
    ///   numbers between were FEC, or a picture no one refers to.
    /// Nil when anything is kept between, or nothing can be said.
    public func unneededNumbers(before sequenceNumber: UInt16, fecTimestamp: UInt32? = nil) -> ClosedRange<UInt16>? {
        guard format == .h264, let newest = packets.keys.max() else { return nil }
        let sequence = newest + Int64(Int16(bitPattern: sequenceNumber &- UInt16(truncatingIfNeeded: newest)))
        func gap(after start: Int64) -> ClosedRange<UInt16>? {
            guard sequence - 1 > start, sequence - start <= 64, ((start + 1)..<sequence).allSatisfy({ packets[$0] == nil }) else { return nil }
            return UInt16(truncatingIfNeeded: start + 1)...UInt16(truncatingIfNeeded: sequence - 1)
        }
        if let fecTimestamp {
            if let marker = packets.first(where: { $0.key < sequence && $0.value.marker && $0.value.timestamp == fecTimestamp })?.key { return gap(after: marker) }
            return fecTimestamp == lastReleasedTimestamp ? lastReleased.flatMap(gap) : nil
        }
        guard let lastReleased, let last = lastFrameNumber, let bits = frameNumberBits, last.bits == bits,
              let packet = packets[sequence], packet.opensPicture, let payload = try? H264Payload(parsing: packet.data) else { return nil }
        let slice: [UInt8]?
        switch payload {
        case .single(let unit): slice = unit
        case .aggregate(let units): slice = units.first { H264Syntax.sliceStart($0, frameNumberBits: nil) != nil }
        case .fragment(let header, let start, _, let data): slice = start ? [header] + data.prefix(16) : nil
        }
        guard let slice, let start = H264Syntax.sliceStart(slice, frameNumberBits: bits), start.firstMacroblock == 0,
              start.frameNumber == last.next else { return nil }
        return gap(after: lastReleased)
    }

    /// Whether the packet at `sequence` opens its frame: VP8 says so; for H.264, see the type's
    /// notes (`completeFrame` checks that a frame after a gap decodes on its own).
    private func startsFrame(_ sequence: Int64, _ packet: Packet) -> Bool {
        guard format == .h264 else { return packet.isFrameStart }
        if sequence - 1 == lastReleased { return true }
        guard let previous = packets[sequence - 1] else { return packet.isKeyframeStart || packet.opensPicture }
        return previous.timestamp != packet.timestamp
    }

    /// The frame whose first packet is `start`, if all its packets are here.
    private func completeFrame(startingAt start: Int64, now: Duration) -> Frame? {
        guard let first = packets[start], startsFrame(start, first) else { return nil }
        var data = first.data
        var payloads: [(sequence: UInt16, payload: [UInt8])] = format == .h264 ? [(first.sequenceNumber, first.data)] : []
        var sequence = start
        var completedAt = first.arrival
        var packet = first
        while !packet.marker {
            sequence += 1
            guard let next = packets[sequence], next.timestamp == first.timestamp, format == .h264 || !next.isFrameStart else { return nil }
            if format == .vp8 { data += next.data } else { payloads.append((next.sequenceNumber, next.data)) }
            completedAt = max(completedAt, next.arrival)
            packet = next
        }
        if format == .h264 {
            // Every packet is here, so only a payload that does not parse leaves a hole, and the
            // decoder then asks for a keyframe.
            var depacketizer = H264Depacketizer()
            let accessUnit = depacketizer.accessUnit(from: payloads)
            let ownBits = accessUnit.units.first { $0.first.map(H264NALUnit.type) == H264NALUnit.sequenceParameterSet }
                .flatMap { H264Syntax.frameNumberBits(sequenceParameterSet: $0) }
            var number: FrameNumber?
            if let bits = ownBits ?? frameNumberBits, let slice = accessUnit.units.first(where: { $0.first.map { [H264NALUnit.nonIDRSlice, H264NALUnit.idrSlice].contains(H264NALUnit.type(of: $0)) } ?? false }),
               let start = H264Syntax.sliceStart(slice, frameNumberBits: bits), start.firstMacroblock == 0, let value = start.frameNumber {
                number = FrameNumber(value: value, isReference: H264Syntax.isReference(slice[0]), bits: bits)
            }
            // After a gap, a frame is taken when it decodes on its own (an IDR with its parameter
            // sets) or, not being an IDR, starts at its picture's first slice with a frame_num
            // (`continues` then judges whether it follows the last frame).
            if start - 1 != lastReleased, packets[start - 1] == nil, !accessUnit.decodable, accessUnit.isKeyframe || number == nil { return nil }
            return Frame(data: accessUnit.annexB, rtpTimestamp: first.timestamp, isKeyframe: accessUnit.isKeyframe, firstSequence: start,
                         lastSequence: sequence, completedAt: completedAt, frameNumber: number, frameNumberBits: ownBits)
        }
        return Frame(data: data, rtpTimestamp: first.timestamp, isKeyframe: first.isKeyframeStart,
                     firstSequence: start, lastSequence: sequence, completedAt: completedAt, pictureID: first.pictureID)
    }

    /// The first keyframe whose packets are all here. Only keyframes' first packets are looked
    /// at (kept aside as they arrive), so waiting out a hole costs no sort of the whole buffer
    /// for every packet that arrives meanwhile.
    private func nextCompleteKeyframe(now: Duration) -> Frame? {
        for sequence in keyframeStarts.sorted() {
            // H.264's are only packets that may open a keyframe: the frame says whether it is one.
            if let frame = completeFrame(startingAt: sequence, now: now), frame.isKeyframe { return frame }
        }
        return nil
    }

    private mutating func dropOldestFrame() {
        guard let oldest = packets.keys.min(), let timestamp = packets[oldest]?.timestamp else { return }
        let doomed = packets.filter { $0.value.timestamp == timestamp }.map(\.key)
        for sequence in doomed {
            packets[sequence] = nil
            keyframeStarts.remove(sequence)
        }
        lastReleased = max(lastReleased ?? Int64.min, doomed.max() ?? oldest)
        lastPictureID = nil
        lastFrameNumber = nil
        framesDropped += 1
        keyframeNeeded = true
    }
}
