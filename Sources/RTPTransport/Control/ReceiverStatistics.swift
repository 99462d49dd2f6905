import Platform
/// Reception statistics of one RTP source, as RFC 3550 §6.4 and Appendix A define them:
/// extended highest sequence number, cumulative and fractional loss, interarrival jitter, and
/// the LSR/DLSR pair that lets the sender compute the round-trip time. Pure: time is passed in.
public struct ReceiverStatistics: Sendable {
    public let ssrc: UInt32
    public let clockRate: Double

    private var unwrapper = SequenceUnwrapper()
    private var baseSequence: Int64?
    private var highest: Int64 = 0
    private var received: Int64 = 0
    private var expectedPrior: Int64 = 0
    private var receivedPrior: Int64 = 0
    private var jitter = 0.0
    private var lastTransit: Double?
    private var lastSRMiddle: UInt32 = 0
    private var lastSRArrival: Duration?

    public init(ssrc: UInt32, clockRate: Double) {
        self.ssrc = ssrc
        self.clockRate = clockRate
    }

    public var packetsReceived: Int64 { received }
    public var expected: Int64 { baseSequence.map { highest - $0 + 1 } ?? 0 }
    public var cumulativeLost: Int64 { expected - received }
    /// Interarrival jitter in timestamp units (§A.8).
    public var jitterUnits: Double { jitter }

    public mutating func received(sequenceNumber: UInt16, rtpTimestamp: UInt32, arrival: Duration) {
        let sequence = unwrapper.unwrap(sequenceNumber)
        if baseSequence == nil {
            baseSequence = sequence
            highest = sequence
        }
        highest = max(highest, sequence)
        received += 1
        let arrivalUnits = (arrival.inSeconds) * clockRate
        let transit = arrivalUnits - Double(rtpTimestamp)
        if let lastTransit {
            var d = abs(transit - lastTransit)
            if d > clockRate * 10 { d = 0 }  // timestamp wrap or a new stream start
            jitter += (d - jitter) / 16
        }
        lastTransit = transit
    }

    /// Remembers a sender report for LSR/DLSR.
    public mutating func senderReportReceived(ntpTimestamp: UInt64, arrival: Duration) {
        lastSRMiddle = UInt32((ntpTimestamp >> 16) & 0xffff_ffff)
        lastSRArrival = arrival
    }

    /// The report block for the next RR or SR; resets the "since last report" interval.
    public mutating func makeReport(now: Duration) -> ReceptionReport {
        let expectedInterval = expected - expectedPrior
        let receivedInterval = received - receivedPrior
        expectedPrior = expected
        receivedPrior = received
        let lostInterval = expectedInterval - receivedInterval
        let fraction: UInt8 = expectedInterval <= 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / expectedInterval))
        var delay: UInt32 = 0
        if let arrival = lastSRArrival {
            let elapsed = now - arrival
            let seconds = elapsed.inSeconds
            delay = UInt32(clamping: Int64(max(0, seconds) * 65536))
        }
        return ReceptionReport(ssrc: ssrc, fractionLost: fraction, cumulativeLost: Int32(clamping: cumulativeLost),
                               extendedHighestSequence: UInt32(truncatingIfNeeded: highest), jitter: UInt32(jitter),
                               lastSenderReport: lastSRMiddle, delaySinceLastSenderReport: delay)
    }
}

/// NTP timestamps (RFC 3550 §4) and the round-trip time computed from a report block (§6.4.1).
public enum NTPTime {
    /// Seconds between the NTP era (1900) and the Unix epoch.
    static let unixOffset: UInt64 = 2_208_988_800

    public static func timestamp(unixSeconds: Double) -> UInt64 {
        let seconds = UInt64(unixSeconds) + unixOffset
        let fraction = UInt64((unixSeconds - unixSeconds.rounded(.down)) * 4_294_967_296)
        return seconds << 32 | fraction
    }

    /// The middle 32 bits (16.16 fixed point seconds) as LSR and DLSR use.
    public static func compact(_ ntp: UInt64) -> UInt32 { UInt32((ntp >> 16) & 0xffff_ffff) }

    /// RTT = arrival of the report − LSR − DLSR, all in 1/65536 s; nil when the receiver has not
    /// yet seen a sender report (LSR = 0).
    public static func roundTripTime(reportArrivalNTP: UInt64, report: ReceptionReport) -> Duration? {
        guard report.lastSenderReport != 0 else { return nil }
        let arrival = compact(reportArrivalNTP)
        let rtt = Int64(arrival &- report.lastSenderReport &- report.delaySinceLastSenderReport)
        let wrapped = Int64(Int32(truncatingIfNeeded: rtt))
        guard wrapped >= 0 else { return .zero }
        return .microseconds(wrapped * 1_000_000 / 65536)
    }
}

/// Limits how often a receiver asks for a keyframe (PLI/FIR): a keyframe takes a while to arrive,
/// and asking again before it can arrive only makes the sender send several (RFC 4585 §3.4 spirit).
public struct KeyframeRequestThrottle: Sendable {
    public var minimumInterval: Duration
    private var lastRequest: Duration?

    public init(minimumInterval: Duration = .milliseconds(300)) {
        self.minimumInterval = minimumInterval
    }

    /// True if a request may go out now (and records it).
    public mutating func shouldRequest(now: Duration, roundTripTime: Duration = .zero) -> Bool {
        let interval = max(minimumInterval, roundTripTime * 2)
        if let lastRequest, now - lastRequest < interval { return false }
        lastRequest = now
        return true
    }
}
