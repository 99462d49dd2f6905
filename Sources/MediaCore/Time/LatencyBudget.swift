/// Where a stream's glass-to-glass time goes, hop by hop: each hop's running total and count,
/// so that two snapshots subtract into the means of an interval, as the other counters do. The
/// sender fills its hops (capture, encode, pacing), the receiver its own (network, jitter buffer,
/// decode, playout); a stream's budget is the one's send side beside the other's receive side.
public struct LatencyBudget: Sendable, Equatable {
    public enum Hop: Int, CaseIterable, Sendable {
        /// Sender: from the picture's capture stamp to the encoder taking it (the queue before
        /// the encoder, scaling); for sound, the packet's duration (its first sample waits for
        /// the packet to fill).
        case capture = 0
        /// Sender: the encoder's own time (with Opus, plus its lookahead: the decoded sound lags
        /// the input by it).
        case encode
        /// Sender: from the encoded frame handed to the pacer to its last packet leaving it.
        case pacing
        /// Receiver: half the round trip RTCP measures (one way cannot be measured without a
        /// shared clock).
        case network
        /// Receiver: from a picture's last packet arriving to its release for decoding; for
        /// sound, from a packet's arrival to its playout.
        case jitterBuffer
        /// Receiver: the decoder's own time.
        case decode
        /// Receiver: after decoding until shown or played: lip sync's hold of the picture before
        /// decoding, the speaker's own delay for sound.
        case playout
    }

    // Fixed storage, a slot per hop: the pacer adds to it for every frame it sends, and a copy
    // of it (the core's counters) must not make that an allocation.
    private var microseconds = InlineArray<7, Int64>(repeating: 0)
    private var counts = InlineArray<7, Int>(repeating: 0)

    public init() {}

    private static func slot(_ hop: Hop) -> Int { hop.rawValue }

    /// Adds one measurement of `hop`; a negative one (clocks that disagree) is not counted.
    public mutating func add(_ hop: Hop, _ duration: Duration) {
        let micros = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        guard micros >= 0 else { return }
        let slot = Self.slot(hop)
        microseconds[slot] += micros
        counts[slot] += 1
    }

    /// Adds another budget's measurements (the pacer's hop into the sender's).
    public mutating func merge(_ other: LatencyBudget) {
        for slot in 0..<7 {
            microseconds[slot] += other.microseconds[slot]
            counts[slot] += other.counts[slot]
        }
    }

    /// What was added since `earlier` (a snapshot of the same budget).
    public func subtracting(_ earlier: LatencyBudget) -> LatencyBudget {
        var result = self
        for slot in 0..<7 {
            result.microseconds[slot] -= earlier.microseconds[slot]
            result.counts[slot] -= earlier.counts[slot]
        }
        return result
    }

    /// How many measurements of `hop`.
    public func count(_ hop: Hop) -> Int { counts[Self.slot(hop)] }

    /// The mean of `hop` in milliseconds, or nil when it was not measured.
    public func meanMilliseconds(_ hop: Hop) -> Double? {
        let slot = Self.slot(hop)
        guard counts[slot] > 0 else { return nil }
        return Double(microseconds[slot]) / Double(counts[slot]) / 1000
    }

    public static func == (a: LatencyBudget, b: LatencyBudget) -> Bool {
        (0..<7).allSatisfy { a.microseconds[$0] == b.microseconds[$0] && a.counts[$0] == b.counts[$0] }
    }

    /// Every measured hop's mean (ms, to a tenth), keyed by the hop's name: the stats' form.
    public var meansMilliseconds: [String: Double] {
        var means: [String: Double] = [:]
        for hop in Hop.allCases { if let mean = meanMilliseconds(hop) { means[String(describing: hop)] = (mean * 10).rounded() / 10 } }
        return means
    }
}
