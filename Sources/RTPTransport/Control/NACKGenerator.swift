/// Receiver side of generic NACK (RFC 4585 §6.2.1): notices gaps in sequence numbers, asks for the
/// missing packets, asks again after a round trip if they do not come, and gives up (asking for a
/// keyframe instead) after `maxRetries` or `maxAge`. Pure: time is passed in.
public struct NACKGenerator: Sendable {
    struct Missing {
        var firstSeen: Duration
        var lastRequested: Duration?
        var retries: Int
        /// When the last request is repeated once (`echoDelay` after it), so that one lost
        /// NACK does not cost a whole round trip.
        var echoAt: Duration?
    }

    public var maxRetries: Int
    public var maxAge: Duration
    /// A gap this large means the stream jumped (a restart, a long outage): recover with a keyframe.
    /// Also the most sequence numbers tracked at once: past it the oldest are given up.
    public var maxMissing: Int
    /// At most this many sequence numbers in one NACK: 250 single entries make 1012 bytes, inside
    /// one MTU with SRTCP's overhead. The rest wait for the next feedback interval.
    public static let maxPerRequest = 250
    /// Wait this long before the first request, so ordinary reordering is not mistaken for loss.
    /// Zero in a call: the NACK goes out with the packet that showed the gap (a reordered
    /// packet costs one needless resend; a wait costs every real loss its length).
    public var reorderingDelay: Duration
    /// Each request goes again this long after it, once: at 10 % loss a lone NACK is lost one
    /// time in ten and its hole waits a round trip longer; two are both lost one time in a
    /// hundred. Nil: no repeat.
    public var echoDelay: Duration? = .milliseconds(15)

    private var unwrapper = SequenceUnwrapper()
    private var highest: Int64?
    private var missing: [Int64: Missing] = [:]

    public private(set) var keyframeNeeded = false
    public private(set) var requested = 0
    public private(set) var recovered = 0
    public private(set) var gaveUp = 0

    /// Retries stop after `maxRetries` or `maxAge`, whichever first: 50 retries are 0.5 s at a
    /// 1 ms round trip (10 ms apart), longer than the jitter buffer waits for a repair (with 20,
    /// holes in a fade of 40 % loss were given up at 0.19 s and a keyframe asked for, while the
    /// jitter buffer would have waited 0.25-0.35 s for them).
    public init(maxRetries: Int = 50, maxAge: Duration = .seconds(1), maxMissing: Int = 500, reorderingDelay: Duration = .zero) {
        self.maxRetries = maxRetries
        self.maxAge = maxAge
        self.maxMissing = maxMissing
        self.reorderingDelay = reorderingDelay
    }

    public var missingCount: Int { missing.count }

    public mutating func clearKeyframeRequest() { keyframeNeeded = false }

    /// A packet arrived (original or retransmission).
    public mutating func received(_ sequenceNumber: UInt16, now: Duration) {
        let sequence = unwrapper.unwrap(sequenceNumber)
        guard let highest else {
            self.highest = sequence
            return
        }
        if sequence <= highest {
            if missing.removeValue(forKey: sequence) != nil { recovered += 1 }
            return
        }
        if sequence - highest - 1 > Int64(maxMissing) {
            missing.removeAll()
            keyframeNeeded = true
        } else {
            for gap in (highest + 1)..<sequence { missing[gap] = Missing(firstSeen: now, lastRequested: nil, retries: 0) }
            if missing.count > maxMissing {
                // Gaps upon gaps (heavy loss, or a sender that skips on purpose): only the newest
                // `maxMissing` sequence numbers are still worth asking for.
                missing = missing.filter { $0.key > sequence - Int64(maxMissing) }
                gaveUp += 1
                keyframeNeeded = true
            }
        }
        self.highest = sequence
    }

    /// Stops asking for `sequenceNumber` and every hole before it: the receiver has moved past
    /// them (a frame after them was decoded, or skipped for a keyframe). Neither a recovery nor
    /// a loss given up on: such a hole is no reason for a keyframe.
    public mutating func forget(through sequenceNumber: UInt16) {
        guard let through = unwrapped(sequenceNumber) else { return }
        missing = missing.filter { $0.key > through }
    }

    /// Holes from `first` through `last` are not worth a request: numbers no frame needs.
    public mutating func forget(_ first: UInt16, through last: UInt16) {
        guard let upper = unwrapped(last) else { return }
        let lower = upper - Int64(last &- first)
        missing = missing.filter { $0.key < lower || $0.key > upper }
    }

    /// A sequence number at or before the highest seen, extended as the missing ones are; nil
    /// when nothing is missing.
    private func unwrapped(_ sequenceNumber: UInt16) -> Int64? {
        guard let highest, !missing.isEmpty else { return nil }
        return highest - Int64(UInt16(truncatingIfNeeded: highest) &- sequenceNumber)
    }

    /// How long after a request the same sequence number is asked for again: the round trip
    /// (the least of recent repairs, `NACKRequester`) and 5 ms, 10 ms at least. The sender
    /// refuses a second resend within three quarters of its round trip, so a retry that comes a
    /// little early for a retransmission still on its way costs nothing.
    public static func retryInterval(roundTripTime: Duration) -> Duration {
        max(.milliseconds(10), roundTripTime + .milliseconds(5))
    }

    /// When the next request (or giving up) is due, if anything is missing: the caller comes back
    /// then rather than on a fixed tick.
    public func nextDue(roundTripTime: Duration) -> Duration? {
        let interval = Self.retryInterval(roundTripTime: roundTripTime)
        return missing.values.lazy.map { entry in
            min(entry.firstSeen + self.maxAge, entry.echoAt ?? .seconds(1_000_000_000),
                entry.lastRequested.map { $0 + interval } ?? entry.firstSeen + self.reorderingDelay)
        }.min()
    }

    /// The sequence numbers to NACK now, given the current round-trip time.
    public mutating func due(now: Duration, roundTripTime: Duration) -> [UInt16] {
        let interval = Self.retryInterval(roundTripTime: roundTripTime)
        var out: [UInt16] = []
        for sequence in missing.keys.sorted() {
            guard out.count < Self.maxPerRequest else { break }
            guard var entry = missing[sequence] else { continue }
            if entry.retries >= maxRetries || now - entry.firstSeen > maxAge {
                missing[sequence] = nil
                gaveUp += 1
                keyframeNeeded = true
                continue
            }
            if let echo = entry.echoAt, now >= echo {
                entry.echoAt = nil
                missing[sequence] = entry
                out.append(UInt16(truncatingIfNeeded: sequence))
                continue
            }
            let ready = entry.lastRequested.map { now - $0 >= interval } ?? (now - entry.firstSeen >= reorderingDelay)
            guard ready else { continue }
            entry.lastRequested = now
            entry.retries += 1
            entry.echoAt = echoDelay.map { now + $0 }
            missing[sequence] = entry
            requested += 1
            out.append(UInt16(truncatingIfNeeded: sequence))
        }
        return out
    }
}
