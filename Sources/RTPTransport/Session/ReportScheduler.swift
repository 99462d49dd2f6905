import MediaCore
import Platform
/// RTCP reports once a second (RFC 3550 §6.4): a sender report and SDES per stream this side
/// sends, with the RTP time extrapolated to the moment of the report; a receiver report and
/// SDES per stream it hears. The peer's report blocks give the round trip (§6.4.1) and the loss
/// it sees.
struct ReportScheduler: Sendable {
    static let interval: Duration = .seconds(1)
    private(set) var next: MediaTime?
    /// The round trip by the peer's reports on our streams.
    private(set) var roundTripTime: Duration?
    /// The fraction of our video, and of our audio, the peer reported lost.
    private(set) var peerVideoLoss: Double?
    private(set) var peerAudioLoss: Double?

    /// The first reports go a second after the session starts.
    mutating func start(at now: MediaTime) { if next == nil { next = now + Self.interval } }

    /// Whether reports are due now; if so, the next are scheduled.
    mutating func due(at now: MediaTime) -> Bool {
        guard let next, now >= next else { return false }
        self.next = max(next + Self.interval, now)
        return true
    }

    /// A report block about one of our streams, arrived at `arrivalNTP`.
    mutating func peerReported(_ report: ReceptionReport, arrivalNTP: UInt64, isVideo: Bool) {
        if let rtt = NTPTime.roundTripTime(reportArrivalNTP: arrivalNTP, report: report) { roundTripTime = rtt }
        if isVideo { peerVideoLoss = Double(report.fractionLost) / 256 } else { peerAudioLoss = Double(report.fractionLost) / 256 }
    }
}

/// What a sender report says about one stream (RFC 3550 §6.4.1): packets and payload octets sent,
/// and the RTP time of the last packet, extrapolated to the moment of the report.
struct StreamCounters: Sendable {
    let clockRate: Double
    private(set) var packets: UInt32 = 0
    private(set) var octets: UInt32 = 0
    private var lastTimestamp: UInt32 = 0
    private var lastTime: MediaTime = .zero

    init(clockRate: Double) { self.clockRate = clockRate }

    /// A packet whose RTP timestamp stands for `time`.
    mutating func record(_ packet: RTPPacket, at time: MediaTime) {
        packets &+= 1
        octets &+= UInt32(truncatingIfNeeded: packet.payload.count)
        lastTimestamp = packet.timestamp
        lastTime = time
    }

    func report(ssrc: UInt32, ntp: UInt64, now: MediaTime) -> SenderReport {
        SenderReport(ssrc: ssrc, ntpTimestamp: ntp,
                     rtpTimestamp: lastTimestamp &+ UInt32(truncatingIfNeeded: Int64((now - lastTime).inSeconds * clockRate)),
                     packetCount: packets, octetCount: octets)
    }
}
