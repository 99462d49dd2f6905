import MediaCore
/// The congestion controller and the pacer as one piece: packets wait in the pacer (audio first,
/// then retransmissions, then video) and leave at the rate `SendPolicy` derives from the
/// bandwidth estimate, each stamped as it leaves and recorded for the transport-cc feedback that
/// will come back about it; probe clusters are padded with recent video sent again on RTX.
/// Without an estimator the pacer only smooths bursts at a fixed rate. Times are µs.
struct CongestionPacer: Sendable {
    private(set) var pacer: Pacer<RTPPacket>
    private(set) var estimator: BandwidthEstimator?
    /// The estimate from reception reports (and REMB), when the receiver sends no transport-cc.
    private(set) var reported: ReportedLossEstimator?
    /// No transport-cc: auto mode estimates from reports.
    private let reportsOnly: Bool
    private var adapter = TransportFeedbackAdapter()
    private let estimatorConfiguration: BandwidthEstimator.Configuration?
    let overhead: Int
    /// Bytes of probe padding sent so far.
    private(set) var paddingBytes = 0
    /// The pacing hop: how long each video frame's last packet and each audio packet waited here.
    private(set) var videoPacing = LatencyBudget(), audioPacing = LatencyBudget()

    init(congestion: BandwidthEstimator.Configuration?, reportsOnly: Bool = false, fixedRate: Int, overhead: Int) {
        estimatorConfiguration = congestion
        self.reportsOnly = reportsOnly
        pacer = Pacer(pacingRate: fixedRate)
        self.overhead = overhead
    }

    /// Auto mode starts estimating with the first video (as the encoders start).
    mutating func startEstimating() -> Bool {
        guard estimator == nil, reported == nil, let configuration = estimatorConfiguration else { return false }
        if reportsOnly { reported = ReportedLossEstimator(configuration: configuration) } else { estimator = BandwidthEstimator(configuration: configuration) }
        return true
    }

    /// The estimate in force, from transport-cc or from reports.
    var estimate: Int? { estimator?.estimate ?? reported?.estimate }

    /// A reception report on our video, for the estimate from reports.
    mutating func report(fractionLost: UInt8, now: Int64) -> BandwidthEstimator.Change? { reported?.onReport(fractionLost: fractionLost, now: now) }

    /// A REMB, for the estimate from reports (transport-cc's estimate has its own evidence).
    mutating func remb(bitrate: Int, now: Int64) -> BandwidthEstimator.Change? { reported?.onREMB(bitrate: bitrate, now: now) }

    var isEmpty: Bool { pacer.isEmpty }

    func queueDelay(now: Int64) -> Int64 { pacer.queueDelay(now: now) }

    /// Queues a packet; false when the pacer had to drop queued video to take it (what went is
    /// lost to the receiver for good: a keyframe is due).
    mutating func enqueue(_ packet: RTPPacket, priority: Pacer<RTPPacket>.Priority, now: Int64) -> Bool {
        let dropped = pacer.droppedPackets
        pacer.enqueue(packet, size: packet.serializedSize, priority: priority, now: now)
        return pacer.droppedPackets == dropped
    }

    /// Transport-cc feedback: the estimator's step; returns the estimate's change, if any.
    mutating func feedback(_ feedback: TransportCCFeedback, now: Int64) -> BandwidthEstimator.Change?? {
        guard var estimator, let results = try? adapter.results(for: feedback, now: now) else { return nil }
        self.estimator = nil  // the only reference while it changes: no copy of its history
        let change = estimator.onFeedback(results, now: now)
        self.estimator = estimator
        return .some(change)
    }

    /// What may leave now, stamped; probe padding from `padding` (recent video to send again on
    /// RTX, or nil for plain RTP padding of the given size).
    mutating func release(now: Int64, stamper: inout PacketStamper, padding: (Int) -> RTPPacket?) -> [RTPPacket] {
        if let estimator {
            let pacing = SendPolicy.pacing(estimate: estimator.estimate, lastDecrease: estimator.lastDecrease, now: now)
            (pacer.pacingRate, pacer.maxDrainRate) = (pacing.rate, pacing.maxDrainRate)
            pacer.repairRate = SendPolicy.repairRate(estimate: estimator.estimate, queueDelay: estimator.pathQueueDelay)
            // Sharing the path with a loss-based flow, the window spans the queue it keeps full:
            // the path's round trip now, not its shortest of the last 10 s.
            let roundTrip = estimator.competing ? adapter.recentFeedbackDelay : adapter.shortestFeedbackDelay
            pacer.holdVideo = SendPolicy.holdsVideo(estimate: estimator.estimate, outstandingBytes: adapter.outstandingBytes,
                                                    newestFeedbackAt: adapter.newestReported?.at, shortestFeedbackDelay: roundTrip,
                                                    queueDelay: estimator.pathQueueDelay, burstyLink: estimator.burstyLink, now: now)
            if !pacer.probing, let probe = self.estimator?.probeToSend(now: now) { pacer.startProbe(probe, now: now) }
        } else if let reported {
            let pacing = SendPolicy.pacing(estimate: reported.estimate, lastDecrease: nil, now: now)
            (pacer.pacingRate, pacer.maxDrainRate) = (pacing.rate, pacing.maxDrainRate)
        }
        var out: [RTPPacket] = []
        func stamp(_ packet: inout RTPPacket, probe: BandwidthEstimator.ProbeCluster?) {
            guard let sequence = stamper.stamp(&packet) else { return }
            let size = packet.serializedSize + overhead
            adapter.packetSent(sequence: sequence, size: size, atMicroseconds: now)
            if let probe { estimator?.probePacketSent(probe, sequence: sequence, size: size, at: now) }
        }
        while let entry = pacer.next(now: now) {
            var packet = entry.item
            if entry.priority == .video && packet.marker { videoPacing.add(.pacing, .microseconds(now - entry.enqueued)) }
            if entry.priority == .audio { audioPacing.add(.pacing, .microseconds(now - entry.enqueued)) }
            stamp(&packet, probe: entry.probe)
            out.append(packet)
        }
        if estimator != nil && pacer.probing {
            while let bytes = pacer.paddingWanted(now: now), var packet = padding(bytes) {
                stamp(&packet, probe: pacer.currentProbe)
                pacer.paddingSent(size: packet.serializedSize)
                paddingBytes += packet.serializedSize
                out.append(packet)
            }
        }
        return out
    }

    /// How long until the pacer may release more: during a probe, pad every millisecond; idle,
    /// a probe may be due within 20 ms; holding video for the congestion window, 5 ms.
    func timeUntilNext(now: Int64) -> Int64 {
        pacer.probing ? 1_000 : pacer.isEmpty ? 20_000 : pacer.holdVideo ? 5_000 : max(500, pacer.timeUntilNext(now: now))
    }
}
