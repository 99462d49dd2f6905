import Platform
/// Orders Opus RTP packets and tells the player, once per frame period, what to do for the next
/// frame: decode it, recover it from the next packet's in-band FEC, or conceal it. Pure: time is
/// passed in.
///
/// Playout starts once `targetDelay` of audio is buffered. The target adapts to measured jitter
/// (RFC 3550 §A.8): twice the jitter plus one frame, within `minimumDelay ... maximumDelay`.
/// When more than the target plus two frames is buffered (the sender's clock runs fast, or a
/// burst arrived), the oldest frame is dropped to keep latency down.
public struct AudioJitterBuffer: Sendable {
    public enum Playout: Sendable, Equatable {
        /// Not started yet, or nothing received at all.
        case buffering
        case decode([UInt8])
        /// The packet is missing but the next one is here: decode its FEC data for this frame.
        case decodeFEC(nextPacket: [UInt8])
        /// The packet is missing: packet-loss concealment.
        case conceal
    }

    public let frameDuration: Duration
    public let samplesPerFrame: UInt32
    public var minimumDelay: Duration
    public var maximumDelay: Duration
    /// The cap the jitter's own delay had before lip sync added to it.
    private let jitterCap: Duration

    private var unwrapper = SequenceUnwrapper()
    private var packets: [Int64: [UInt8]] = [:]
    private var next: Int64?
    private var started = false
    private var jitter = 0.0
    private var lastTransit: Double?
    private var newest: Int64 = .min
    private var lastPlayed: Int64?
    /// The newest packet's sequence and RTP timestamp, from which played frames' timestamps follow.
    private var anchor: (sequence: Int64, timestamp: UInt32)?

    /// Frames concealed in a row with nothing newer received: past `maxUnderrunConcealment` the
    /// stream has paused or ended, and the buffer goes back to buffering instead of inventing audio.
    private var underrun = 0
    static let maxUnderrunConcealment = 5

    public private(set) var decoded = 0
    public private(set) var recoveredByFEC = 0
    public private(set) var concealed = 0
    public private(set) var latePackets = 0
    public private(set) var droppedForLatency = 0

    public init(frameDuration: Duration = .milliseconds(20), minimumDelay: Duration = .milliseconds(20),
                maximumDelay: Duration = .milliseconds(200)) {
        self.frameDuration = frameDuration
        self.samplesPerFrame = UInt32(frameDuration.components.attoseconds / 1_000_000_000_000_000 * 48 + frameDuration.components.seconds * 48_000)
        self.minimumDelay = minimumDelay
        self.maximumDelay = maximumDelay
        self.jitterCap = maximumDelay
    }

    public var targetDelay: Duration {
        min(maximumDelay, max(minimumDelay, .seconds(2 * jitter) + frameDuration))
    }

    private var targetFrames: Int64 {
        let frames = (targetDelay / frameDuration).rounded(.up)
        return Int64(max(1, frames))
    }

    /// Packets held at most (5 s of 20 ms frames). Playout that stalls, or a sender that jumps
    /// ahead, makes the buffer skip to its newest frames rather than grow.
    public static let capacity: Int64 = 256
    /// Packets held now.
    public var count: Int { packets.count }

    public mutating func insert(_ packet: RTPPacket, arrival: Duration) {
        guard !packet.payload.isEmpty else { return }
        let sequence = unwrapper.unwrap(packet.sequenceNumber)
        if let next, sequence < next {
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
        packets[sequence] = packet.payload
        if sequence >= newest { anchor = (sequence, packet.timestamp) }
        newest = max(newest, sequence)
        if next == nil { next = sequence }
        if let expected = next, newest - expected >= Self.capacity {
            let keepFrom = newest - targetFrames + 1
            droppedForLatency += packets.keys.filter { $0 < keepFrom }.count
            packets = packets.filter { $0.key >= keepFrom }
            next = keepFrom
        }
    }

    /// The RTP timestamp of the frame played last (frames of `frameDuration` each).
    public var lastPlayedTimestamp: UInt32? {
        guard let anchor, let lastPlayed else { return nil }
        return anchor.timestamp &- UInt32(truncatingIfNeeded: (anchor.sequence - lastPlayed) * Int64(samplesPerFrame))
    }

    /// Delay added on top of the jitter's own (lip sync holding audio for a later picture). A
    /// larger one pauses playout until that much more is buffered; a smaller one is caught up
    /// by skipping a frame at a time.
    public mutating func setExtraDelay(_ extra: Duration, base: Duration) {
        let old = minimumDelay
        minimumDelay = base + extra
        maximumDelay = max(jitterCap, minimumDelay)
        if minimumDelay - old > frameDuration { started = false }
    }

    /// What to play for the next frame period.
    public mutating func nextPlayout() -> Playout {
        guard let expected = next else { return .buffering }
        let buffered = newest - expected + 1
        if !started {
            guard buffered >= targetFrames else { return .buffering }
            started = true
        }
        var current = expected
        if expected > newest {
            underrun += 1
            guard underrun <= Self.maxUnderrunConcealment else {
                // Start over at the next packet that arrives; the pause is not jitter.
                started = false
                next = nil
                lastTransit = nil
                return .buffering
            }
            next = expected + 1
            concealed += 1
            return .conceal
        }
        underrun = 0
        if buffered > targetFrames + 2 {
            // Too much latency: skip the oldest frame.
            packets[current] = nil
            current += 1
            droppedForLatency += 1
        }
        defer {
            next = current + 1
            lastPlayed = current
        }
        if let payload = packets.removeValue(forKey: current) {
            decoded += 1
            return .decode(payload)
        }
        if let following = packets[current + 1] {
            recoveredByFEC += 1
            return .decodeFEC(nextPacket: following)
        }
        concealed += 1
        return .conceal
    }
}
