import Platform
/// Orders Opus RTP packets and tells the player, each time it needs more audio, what comes next:
/// decode a packet, recover a lost one from the next packet's in-band FEC, or conceal it. Pure:
/// time is passed in.
///
/// Packets may hold any Opus frame duration (a callend peer sends 10 ms on a good path and 20 ms
/// on a thin or lossy one; browsers send 20 ms), and the duration may change mid-stream: the
/// buffer counts what it holds in time, from the packets' RTP timestamps and durations, not in
/// packets. Playout starts once `targetDelay` of audio is buffered; the target follows the
/// measured jitter (RFC 3550 §A.8): twice the jitter plus one packet, within `minimumDelay ...
/// maximumDelay`, so on a quiet path it is one packet and a little.
///
/// The depth follows what arrives, both ways. When the next packet is not there yet, a frame is
/// concealed and the packet is still awaited (the stream is stretched, as libwebrtc's NetEq
/// expands): a late packet is played, not thrown away, and a lost one found missing when the
/// next arrives is rebuilt from that one's FEC; either way the buffer is a frame deeper. When
/// every packet played over a whole second waited at least the target between its arrival and
/// its playout, the packets could all have been played a packet earlier and still kept twice the
/// jitter in hand: the buffer drops as many packets as that slack allows, at once. A queue that
/// stands (playout began on a burst, a stall stretched it, the jitter has calmed) is latency
/// that absorbs nothing. (Without the playout times, the level stands in for the slack: a second
/// in which the buffer never held less than the target and a packet.) More than
/// `burstAllowance` over the target (an outage's backlog, a sender whose clock runs fast) goes a
/// packet per frame played, at once.
public struct AudioJitterBuffer: Sendable {
    public enum Playout: Sendable, Equatable {
        /// Not started yet, or nothing received at all.
        case buffering
        case decode([UInt8])
        /// The packet is missing but the next one is here: decode its FEC data for this frame
        /// (`frameSamples` long).
        case decodeFEC(nextPacket: [UInt8])
        /// The packet is missing: packet-loss concealment of `frameSamples`.
        case conceal
    }

    public var minimumDelay: Duration
    public var maximumDelay: Duration
    /// The cap the jitter's own delay had before lip sync added to it.
    private let jitterCap: Duration

    private struct Entry: Sendable {
        let payload: [UInt8]
        let timestamp: UInt32
        let samples: Int
        let arrival: Duration
    }
    private var unwrapper = SequenceUnwrapper()
    private var packets: [Int64: Entry] = [:]
    /// The sequence number and RTP timestamp to play next.
    private var next: (sequence: Int64, timestamp: UInt32)?
    private var started = false
    private var jitter = 0.0
    private var lastTransit: Double?
    private var newest: (sequence: Int64, end: UInt32) = (.min, 0)
    private var lastPlayed: Int64?
    /// Samples per channel (48 kHz) of the newest packet: the duration assumed for a packet that
    /// never came.
    public private(set) var packetSamples = 960
    /// Samples per channel of the frame `nextPlayout` returned last: what a FEC decode or a
    /// concealment is to produce.
    public private(set) var frameSamples = 960
    /// The RTP timestamp of the frame played last.
    public private(set) var lastPlayedTimestamp: UInt32?

    /// Audio concealed in a row with nothing newer received: past `maxUnderrunConcealment` the
    /// stream has paused or ended, and the buffer goes back to buffering instead of inventing audio.
    private var underrun = Duration.zero
    static let maxUnderrunConcealment = Duration.milliseconds(100)
    /// The least audio held when a frame was asked for, over the audio played since `span` began.
    private var standing = (least: Duration.seconds(3600), span: Duration.zero)
    static let standingWindow = Duration.seconds(1)
    static let burstAllowance = Duration.milliseconds(100)

    public private(set) var decoded = 0
    public private(set) var recoveredByFEC = 0
    public private(set) var concealed = 0
    public private(set) var latePackets = 0
    public private(set) var droppedForLatency = 0

    public init(minimumDelay: Duration = .zero, maximumDelay: Duration = .milliseconds(200)) {
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
        self.jitterCap = maximumDelay
    }

    private static func duration(samples: Int) -> Duration { .microseconds(Int64(samples) * 1000 / 48) }

    /// One packet's duration on a quiet path, the target's floor: the newest packet's.
    public var packetDuration: Duration { Self.duration(samples: packetSamples) }

    public var targetDelay: Duration {
        min(maximumDelay, max(minimumDelay, .seconds(2 * jitter) + packetDuration))
    }

    /// Audio held now, from the next frame to play to the end of the newest packet.
    public var buffered: Duration {
        guard let next, newest.sequence >= next.sequence else { return .zero }
        return Self.duration(samples: max(0, Int(Int32(bitPattern: newest.end &- next.timestamp))))
    }

    /// Packets held at most (about 5 s of 20 ms packets). Playout that stalls, or a sender that
    /// jumps ahead, makes the buffer skip to its newest packets rather than grow.
    public static let capacity: Int64 = 256
    /// Packets held now.
    public var count: Int { packets.count }

    /// A packet as it arrives; `samples` is its duration in samples per channel at 48 kHz (the
    /// caller reads it from the Opus packet; nil: the newest packet's).
    public mutating func insert(_ packet: RTPPacket, arrival: Duration, samples: Int? = nil) {
        guard !packet.payload.isEmpty else { return }
        let sequence = unwrapper.unwrap(packet.sequenceNumber)
        if let next, sequence < next.sequence, started || lastPlayed.map({ sequence <= $0 }) ?? false {
            latePackets += 1
            return
        }
        if next == nil, let last = lastPlayed, sequence <= last {
            latePackets += 1
            return
        }
        let arrivalSeconds = arrival.inSeconds
        let transit = arrivalSeconds - Double(packet.timestamp) / 48_000
        if let lastTransit {
            let d = abs(transit - lastTransit)
            if d < 10 { jitter += (d - jitter) / 16 }
        }
        lastTransit = transit
        let length = samples ?? packetSamples
        packets[sequence] = Entry(payload: packet.payload, timestamp: packet.timestamp, samples: length, arrival: arrival)
        if sequence >= newest.sequence {
            newest = (sequence, packet.timestamp &+ UInt32(length))
            packetSamples = length
        }
        // Before playout starts, a packet that overtook an earlier one does not skip it.
        if next == nil || sequence < next!.sequence { next = (sequence, packet.timestamp) }
        if let expected = next, newest.sequence - expected.sequence >= Self.capacity {
            let keep = max(1, Int64((targetDelay / packetDuration).rounded(.up)))
            let keepFrom = newest.sequence - keep + 1
            droppedForLatency += packets.keys.filter { $0 < keepFrom }.count
            packets = packets.filter { $0.key >= keepFrom }
            next = (keepFrom, packets[keepFrom]?.timestamp ?? newest.end &- UInt32(keep * Int64(packetSamples)))
        }
    }

    /// Delay added on top of the jitter's own (lip sync holding audio for a later picture). A
    /// larger one pauses playout until that much more is buffered; a smaller one is caught up
    /// by skipping a packet at a time.
    public mutating func setExtraDelay(_ extra: Duration, base: Duration) {
        let old = minimumDelay
        minimumDelay = base + extra
        maximumDelay = max(jitterCap, minimumDelay)
        if minimumDelay - old > packetDuration { started = false }
    }

    /// What to play next (the player asks whenever it has played what it had); `now`: when it
    /// will be played, on the clock of the arrival times.
    /// How long the packet `nextPlayout(at:)` last handed out to decode waited, arrival to
    /// playout (the jitter buffer's hop of the latency); nil when no time was given.
    public private(set) var lastWait: Duration?

    public mutating func nextPlayout(at now: Duration? = nil) -> Playout {
        guard let expected = next else { return .buffering }
        if !started {
            guard buffered >= targetDelay else { return .buffering }
            started = true
        }
        var current = expected
        if expected.sequence > newest.sequence {
            guard underrun < Self.maxUnderrunConcealment else {
                // Start over at the next packet that arrives; the pause is not jitter.
                started = false
                next = nil
                lastTransit = nil
                underrun = .zero
                return .buffering
            }
            // Late, or lost with nothing after it yet: conceal a frame and keep waiting for it.
            frameSamples = packetSamples
            underrun += Self.duration(samples: frameSamples)
            concealed += 1
            return .conceal
        }
        underrun = .zero
        let level = buffered
        var excess = level > targetDelay + max(packetDuration * 2, Self.burstAllowance) ? packetDuration : .zero
        // The slack: how long the packet played now waited (or, without times, the level less
        // what the target asks for beyond one packet, which comes to the same on a steady stream).
        if let now, let entry = packets[current.sequence] {
            standing.least = min(standing.least, now - entry.arrival)
        } else if now == nil {
            standing.least = min(standing.least, level - packetDuration)
        }
        standing.span += packetDuration
        if standing.span >= Self.standingWindow {
            if standing.least >= targetDelay { excess = max(excess, standing.least - targetDelay + packetDuration) }
            standing = (.seconds(3600), .zero)
        }
        // Too much latency: skip the oldest packets, as much audio as stood in excess.
        while excess >= packetDuration, let oldest = packets[current.sequence] {
            packets[current.sequence] = nil
            current = (current.sequence + 1, oldest.timestamp &+ UInt32(oldest.samples))
            excess -= Self.duration(samples: oldest.samples)
            droppedForLatency += 1
        }
        lastPlayed = current.sequence
        lastPlayedTimestamp = current.timestamp
        if let entry = packets.removeValue(forKey: current.sequence) {
            lastWait = now.map { $0 - entry.arrival }
            next = (current.sequence + 1, entry.timestamp &+ UInt32(entry.samples))
            frameSamples = entry.samples
            lastPlayedTimestamp = entry.timestamp
            decoded += 1
            return .decode(entry.payload)
        }
        // Lost: as long as the gap to the packet after it, when that says (one packet's worth
        // of a 2.5 ms multiple up to 120 ms), else the newest packet's duration.
        let following = packets[current.sequence + 1]
        let gap = following.map { Int(Int32(bitPattern: $0.timestamp &- current.timestamp)) } ?? 0
        frameSamples = gap > 0 && gap <= 5760 && gap % 120 == 0 ? gap : packetSamples
        next = (current.sequence + 1, current.timestamp &+ UInt32(frameSamples))
        if let following {
            recoveredByFEC += 1
            return .decodeFEC(nextPacket: following.payload)
        }
        concealed += 1
        return .conceal
    }
}
