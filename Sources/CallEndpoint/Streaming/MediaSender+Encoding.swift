import MediaCore
import RTPTransport

/// The estimate becomes encoder settings: the encoding controller (auto mode) follows what the
/// session core's bandwidth estimator says, and the encoding threads apply what it decides.
extension MediaSender {
    /// A new estimate, from the loop's thread.
    func estimated(bitrate: Int, lossFraction: Double, cause: String) {
        let made = encoding.withLock { e -> [EncodingDecision] in
            e.estimated(bitrate: bitrate, lossFraction: lossFraction, cause: cause)
            e.stats.estimateBitrate = bitrate
            guard var controller = e.controller else { return [] }
            let made = controller.update(estimate: bitrate, lossFraction: lossFraction, cause: cause, now: elapsed)
            return publish(made, controller: controller, in: &e)
        }
        report(made)
    }

    /// Video FEC now sends `rate` FEC packets per media packet: the encoder gets that much less.
    func protected(_ rate: Double) {
        let made = encoding.withLock { e -> [EncodingDecision] in
            guard var controller = e.controller else { return [] }
            controller.videoProtection = rate
            let estimate = e.estimate ?? (controller.videoBitrate, 0)
            let made = controller.update(estimate: estimate.bitrate, lossFraction: estimate.lossFraction, cause: "fec", now: elapsed)
            return publish(made, controller: controller, in: &e)
        }
        report(made)
    }

    /// Keeps the controller's new state and what it decided in the statistics; returns the
    /// decisions, which the caller reports once out of the lock.
    func publish(_ made: [EncodingDecision], controller: EncodingController, in e: inout Encoding) -> [EncodingDecision] {
        e.controller = controller
        e.stats.videoTargetBitrate = controller.videoBitrate
        e.stats.audioTargetBitrate = controller.audioBitrate
        e.stats.mode = controller.mode.description
        if !made.isEmpty { e.stats.decisions = Array((e.stats.decisions + made).suffix(20)) }
        return made
    }

    /// The decision log, written outside every lock.
    /// The session's first controller, on `ladder`: the session core's estimator starts with the
    /// first frame, at this rate (800 kbit/s, or the cap when lower).
    func startController(_ ladder: ModeLadder, now: Duration, in e: inout Encoding) -> [EncodingDecision] {
        let start = min(800_000, configuration.maxVideoBitrate)
        var controller = EncodingController(ladder: ladder, maxVideoBitrate: configuration.maxVideoBitrate, startBitrate: start)
        controller.audioRedundancy = configuration.payloadTypes.audioRED != nil && audioTrack != nil ? 1 : 0
        return publish(controller.update(estimate: start, lossFraction: 0, cause: BandwidthEstimator.Cause.start.rawValue, now: now),
                       controller: controller, in: &e)
    }

    func report(_ made: [EncodingDecision]) {
        guard let onDecision = configuration.onDecision else { return }
        for decision in made { onDecision(decision) }
    }
}
