import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// The pacing stage: the pacer releases packets at the rate the congestion controller (SendPolicy)
/// allows, stamps transport-wide sequence numbers, pads probe clusters; and the controller's
/// estimate becomes encoder settings.
extension MediaSender {
    /// Sends what the pacer releases (audio first, then retransmissions, then video), assigning
    /// transport-wide sequence numbers at the moment of sending, and pads probe clusters. Returns
    /// how long until the pacer may release more, and whether it is done: the media threads have
    /// ended and the queue is empty.
    func pace(now time: Duration) -> (wait: Duration, done: Bool) {
        let extensionID = configuration.transportSequenceExtensionID
        do {
            let now = time.inMicroseconds
            let (batch, done, wait): ([RTPPacket], Bool, Int64) = state.withLock { s in
                if let estimator = s.estimator {
                    // The congestion controller's rules (SendPolicy): pacing, the congestion window.
                    let pacing = SendPolicy.pacing(estimate: estimator.estimate, lastDecrease: estimator.lastDecrease, now: now)
                    (s.pacer.pacingRate, s.pacer.maxDrainRate) = (pacing.rate, pacing.maxDrainRate)
                    // Sharing the path with a loss-based flow, the window spans the queue it keeps
                    // full: the path's round trip now, not its shortest of the last 10 s.
                    let roundTrip = estimator.competing ? s.adapter.recentFeedbackDelay : s.adapter.shortestFeedbackDelay
                    s.pacer.holdVideo = SendPolicy.holdsVideo(estimate: estimator.estimate, outstandingBytes: s.adapter.outstandingBytes,
                                                              newestFeedbackAt: s.adapter.newestReported?.at,
                                                              shortestFeedbackDelay: roundTrip, now: now)
                    if !s.pacer.probing, let probe = s.estimator?.probeToSend(now: now) { s.pacer.startProbe(probe, now: now) }
                } else {
                    s.pacer.pacingRate = max(configuration.videoBitrate, configuration.maxVideoBitrate) * 3
                }
                var out: [RTPPacket] = []
                func stamp(_ packet: inout RTPPacket, probe: BandwidthEstimator.ProbeCluster?) {
                    let mid = midElement(for: packet.ssrc, state: s)
                    guard let extensionID else {
                        if let mid { packet.setHeaderExtensionElements([mid]) }
                        return
                    }
                    let sequence = s.transportSequence
                    s.transportSequence &+= 1
                    packet.setHeaderExtensionElements([HeaderExtensionElement(id: extensionID, data: TransportSequenceNumber.encode(sequence))] + (mid.map { [$0] } ?? []))
                    let size = packet.serializedSize + transport.overhead
                    s.adapter.packetSent(sequence: sequence, size: size, atMicroseconds: now)
                    if let probe { s.estimator?.probePacketSent(probe, sequence: sequence, size: size, at: now) }
                }
                while let entry = s.pacer.next(now: now) {
                    var packet = entry.item
                    stamp(&packet, probe: entry.probe)
                    out.append(packet)
                }
                if s.estimator != nil && s.pacer.probing, let rtxType = configuration.payloadTypes.rtx {
                    while let bytes = s.pacer.paddingWanted(now: now) {
                        s.rtxSequence &+= 1
                        // Recent video packets sent again on the RTX stream, full size; plain RTP
                        // padding (at most 255 bytes) only when there is nothing to resend.
                        var padding: RTPPacket
                        if let recent = s.history.recent(s.probePaddingCursor % 16) {
                            s.probePaddingCursor += 1
                            padding = RTX.wrap(recent, ssrc: rtxSSRC, payloadType: rtxType, sequenceNumber: s.rtxSequence)
                        } else {
                            padding = RTPPacket(payloadType: rtxType, sequenceNumber: s.rtxSequence, timestamp: 0,
                                                ssrc: rtxSSRC, paddingLength: min(255, bytes))
                        }
                        stamp(&padding, probe: s.pacer.currentProbe)
                        s.pacer.paddingSent(size: padding.serializedSize)
                        s.stats.paddingBytes += padding.serializedSize
                        out.append(padding)
                    }
                }
                // Sleep until the budget allows the next packet, a new packet is queued, or (idle) a
                // probe may be due; during a probe, pad every millisecond.
                let wait: Int64 = s.pacer.probing ? 1_000 : s.pacer.isEmpty ? 20_000 : s.pacer.holdVideo ? 5_000 : max(500, s.pacer.timeUntilNext(now: now))
                return (out, s.pacer.isEmpty && mediaFinished.load(ordering: .relaxed) >= mediaThreads, wait)
            }
            for packet in batch { send(packet, kind: packet.ssrc == audioSSRC ? .audio : .video) }
            return (.microseconds(wait), done)
        }
    }

    /// Applies a bandwidth estimate to the encoders' settings (auto mode).
    func adapt(estimator: BandwidthEstimator, cause: String, state s: inout State) {
        guard var controller = s.controller else { return }
        let made = controller.update(estimate: estimator.estimate, lossFraction: estimator.lossFraction, cause: cause, now: clock.now)
        s.stats.estimateBitrate = estimator.estimate
        publish(made, controller: controller, state: &s)
    }

    /// Keeps the controller's new state and reports what it decided (stats, decision log).
    func publish(_ made: [EncodingDecision], controller: EncodingController, state s: inout State) {
        s.controller = controller
        s.stats.videoTargetBitrate = controller.videoBitrate
        s.stats.audioTargetBitrate = controller.audioBitrate
        s.stats.mode = controller.mode.description
        guard !made.isEmpty else { return }
        s.stats.decisions = Array((s.stats.decisions + made).suffix(20))
        if let onDecision = configuration.onDecision { for d in made { onDecision(d) } }
    }
}
