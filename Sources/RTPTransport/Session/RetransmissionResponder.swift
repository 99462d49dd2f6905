import Platform
import MediaCore
/// Answers the peer's NACKs (RFC 4585 §6.2.1) from the video sent in the last second, on the RTX
/// stream (RFC 4588), within the retransmission budget when a bandwidth estimate is known
/// (`SendPolicy`); packets too old to resend ask for a keyframe instead. Also lends recent video
/// to probe clusters as padding that carries something.
struct RetransmissionResponder: Sendable {
    let ssrc: UInt32
    let payloadType: UInt8
    /// RED packets kept (H.264's FEC) and the RTX payload type they are resent with.
    var red: (payloadType: UInt8, rtxPayloadType: UInt8)?
    private(set) var history = RetransmissionHistory()
    private var sequence = UInt16.random(in: 0...UInt16.max)
    private var budget = RetransmissionBudget()
    private var paddingCursor = 0
    private(set) var retransmitted = 0
    private(set) var refused = 0

    init(ssrc: UInt32, payloadType: UInt8) { (self.ssrc, self.payloadType) = (ssrc, payloadType) }

    mutating func sent(_ packet: RTPPacket, at now: MediaTime) { history.store(packet, sentAt: now.sinceOrigin) }

    /// The RTX packets to queue for `lost`, and whether a keyframe should go instead of some.
    mutating func answer(_ lost: [UInt16], roundTripTime: Duration, estimate: Int?, pacerQueueDelay: Int64, pathQueueDelay: Double?,
                         now: MediaTime) -> (packets: [RTPPacket], keyframeInstead: Bool) {
        let answer = history.answer(lost, now: now.sinceOrigin, roundTripTime: roundTripTime)
        var out: [RTPPacket] = []
        for original in answer.packets {
            if let estimate, !budget.admit(bytes: original.serializedSize, estimate: estimate, pacerQueueDelay: pacerQueueDelay,
                                           pathQueueDelay: pathQueueDelay ?? .infinity, now: now.microseconds) {
                refused += 1
                continue
            }
            sequence &+= 1
            retransmitted += 1
            let rtx = original.payloadType == red?.payloadType ? red!.rtxPayloadType : payloadType
            out.append(RTX.wrap(original, ssrc: ssrc, payloadType: rtx, sequenceNumber: sequence))
        }
        return (out, answer.keyframeInstead)
    }

    /// A probe's padding of about `bytes`: one of the last 16 video packets again, full size;
    /// plain RTP padding (at most 255 bytes) when there is nothing to resend.
    mutating func padding(_ bytes: Int) -> RTPPacket {
        sequence &+= 1
        if let recent = history.recent(paddingCursor % 16), recent.payloadType != red?.payloadType {
            paddingCursor += 1
            return RTX.wrap(recent, ssrc: ssrc, payloadType: payloadType, sequenceNumber: sequence)
        }
        return RTPPacket(payloadType: payloadType, sequenceNumber: sequence, timestamp: 0, ssrc: ssrc, paddingLength: min(255, bytes))
    }
}
