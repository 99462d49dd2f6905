import Platform
import MediaCore
/// Asks for lost video packets again (generic NACK, RFC 4585 §6.2.1) and measures the round trip
/// by how long the retransmissions take: a receive-only endpoint has no other measure. The NACK
/// generator decides which holes are due; the jitter buffer waits for repairs as long as four
/// attempts take (`retransmissionWait`).
struct NACKRequester: Sendable {
    private var generator = NACKGenerator()
    /// When each outstanding sequence number was first asked for.
    private var askedAt: [UInt16: MediaTime] = [:]
    /// First request → retransmission times of the last 5 s, and their least: the round trip.
    /// A retransmission cannot say which request it answers (Karn's problem): measured from the
    /// latest request, one answering an earlier request that arrived just after a retry measured
    /// a few milliseconds, the retry interval shrank with it and the estimate collapsed to 10 ms
    /// at 10 % loss. From the first request a sample is never short, only long when the first
    /// request or its answer was lost, and the least of recent samples is one that was not.
    private var samples: [(at: MediaTime, time: Duration)] = []
    private var measured: Duration = .milliseconds(50)
    /// The round trip by RTCP reports (RFC 3550 §6.4.1), when this endpoint sends too: a floor
    /// under the measured one. A probe pads with recent video sent again on RTX, and a padding
    /// packet that carries a packet asked for looks like its repair, a few milliseconds after
    /// the request: at 100 ms the measure fell to 25-45 ms, the jitter buffer showed frames one
    /// short round trip late and gave up on holes a real round trip would have filled.
    var reportedRoundTripTime: Duration?
    /// What a repair takes at least: the least recent repair, not below the reported round trip.
    var roundTripTime: Duration { max(measured, reportedRoundTripTime ?? .zero) }
    static let sampleWindow: Duration = .seconds(5)
    private(set) var sent = 0

    /// Time for four NACK attempts (the first goes at once, the generator re-asks every
    /// `retryInterval`) and the last one's round trip, plus 15 ms of spread, and 250 ms at
    /// least: how long a hole may take to fill before only a keyframe helps. The floor is for
    /// short round trips and bursts of loss: at 1 ms four attempts take 50 ms, a fade of 0.2 s
    /// at 40 % loss outlasted them, and the keyframe asked for instead (large, through the same
    /// fade) froze the picture for 0.8 s where waiting a little more repaired it.
    var retransmissionWait: Duration {
        max(.milliseconds(250), .milliseconds(15) + roundTripTime + NACKGenerator.retryInterval(roundTripTime: roundTripTime) * 3)
    }

    /// When the next NACK (or giving up on a hole) is due, if any packet is missing.
    var nextDue: MediaTime? { generator.nextDue(roundTripTime: roundTripTime).map { MediaTime($0) } }

    var missing: Int { generator.missingCount }
    /// Too many holes, or holes too old: only a keyframe helps.
    var keyframeNeeded: Bool { generator.keyframeNeeded }
    mutating func clearKeyframeRequest() { generator.clearKeyframeRequest() }

    mutating func received(_ sequenceNumber: UInt16, at now: MediaTime) { generator.received(sequenceNumber, now: now.sinceOrigin) }

    /// Holes up to `sequenceNumber` are no longer wanted (the frames after them went to the decoder).
    mutating func forget(through sequenceNumber: UInt16) { generator.forget(through: sequenceNumber) }
    /// Holes in `numbers` are no frame's (H.264's FEC, `VideoJitterBuffer.unneededNumbers`).
    mutating func forget(_ numbers: ClosedRange<UInt16>) { generator.forget(numbers.lowerBound, through: numbers.upperBound) }

    /// A retransmission of `sequenceNumber` arrived: true when it was asked for (an RTX packet
    /// nobody asked for is a probe's padding), and the round trip is updated.
    mutating func repaired(_ sequenceNumber: UInt16, at now: MediaTime) -> Bool {
        guard let asked = askedAt.removeValue(forKey: sequenceNumber) else { return false }
        samples.removeAll { now - $0.at > Self.sampleWindow }
        if samples.count >= 64 { samples.removeFirst() }
        samples.append((now, now - asked))
        measured = samples.map(\.time).min()!
        return true
    }

    /// The NACK due now, if any.
    mutating func due(senderSSRC: UInt32, mediaSSRC: UInt32, at now: MediaTime) -> GenericNACK? {
        let lost = generator.due(now: now.sinceOrigin, roundTripTime: roundTripTime)
        guard !lost.isEmpty else { return nil }
        if askedAt.count > 2000 { askedAt.removeAll() }
        for sequence in lost where askedAt[sequence] == nil { askedAt[sequence] = now }
        sent += 1
        return GenericNACK(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, lost: lost)
    }
}
