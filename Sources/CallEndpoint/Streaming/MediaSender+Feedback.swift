import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// The feedback stage: the peer's RTCP in, retransmissions (within the budget), keyframes,
/// the bandwidth estimate, round-trip times.
extension MediaSender {
    /// The peer's RTCP (clear): NACK, PLI, FIR, transport-cc feedback, reception reports.
    func handleRTCP(_ bytes: [UInt8]) {
        guard isRTCP(bytes) else { return }
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { return }
        let arrivalNTP = clock.ntpNow
        for packet in packets {
            switch packet {
            case .nack(let nack) where nack.mediaSSRC == videoSSRC && configuration.payloadTypes.rtx != nil:
                let now = clock.now
                let answer = state.withLock { s -> RetransmissionHistory.Answer in
                    s.stats.nacksReceived += 1
                    return s.history.answer(nack.lostSequenceNumbers, now: now, roundTripTime: s.roundTripTime)
                }
                // Retransmissions are paced and counted like media (a burst of them must not
                // flood the bottleneck it was lost in).
                state.withLock { s in
                    let at = now.inMicroseconds
                    for original in answer.packets {
                        // Auto mode: within the retransmission budget (SendPolicy).
                        if let estimator = s.estimator, !s.retransmissionBudget.admit(bytes: original.serializedSize, estimate: estimator.estimate,
                                                                                      pacerQueueDelay: s.pacer.queueDelay(now: at), now: at) {
                            s.stats.retransmissionsRefused += 1
                            continue
                        }
                        s.rtxSequence &+= 1
                        s.stats.retransmitted += 1
                        let rtx = RTX.wrap(original, ssrc: rtxSSRC, payloadType: configuration.payloadTypes.rtx ?? 97, sequenceNumber: s.rtxSequence)
                        s.pacer.enqueue(rtx, size: rtx.serializedSize, priority: .retransmission, now: now.inMicroseconds)
                    }
                }
                wakePacer()
                if answer.keyframeInstead { keyframeWanted.store(true, ordering: .relaxed) }
            case .pictureLossIndication(let pli) where pli.mediaSSRC == videoSSRC:
                keyframeWanted.store(true, ordering: .relaxed)
                state.withLock { $0.stats.keyframeRequests += 1 }
            case .fullIntraRequest(let fir) where fir.entries.contains { $0.ssrc == videoSSRC }:
                keyframeWanted.store(true, ordering: .relaxed)
                state.withLock { $0.stats.keyframeRequests += 1 }
            case .transportFeedback(let feedback):
                let now = clock.now.inMicroseconds
                state.withLock { s in
                    s.stats.transportFeedbackReceived += 1
                    guard var estimator = s.estimator, let results = try? s.adapter.results(for: feedback, now: now) else { return }
                    let change = estimator.onFeedback(results, now: now)
                    s.estimator = estimator
                    adapt(estimator: estimator, cause: (change?.cause ?? .increase).rawValue, state: &s)
                }
            case .receiverReport(let rr):
                absorb(rr.reports, arrivalNTP: arrivalNTP)
            case .senderReport(let sr):
                absorb(sr.reports, arrivalNTP: arrivalNTP)
            default:
                break
            }
        }
    }

    func absorb(_ reports: [ReceptionReport], arrivalNTP: UInt64) {
        for report in reports where report.ssrc == videoSSRC || report.ssrc == audioSSRC {
            state.withLock { s in
                if let rtt = NTPTime.roundTripTime(reportArrivalNTP: arrivalNTP, report: report) {
                    s.roundTripTime = rtt
                    s.stats.roundTripTime = rtt
                }
                if report.ssrc == videoSSRC { s.stats.receiverLossFraction = Double(report.fractionLost) / 256 }
                s.midAcknowledged.insert(report.ssrc)
            }
        }
    }
}
