import MediaCore

/// ULPFEC's sending side (RFC 5109, in RED as libwebrtc negotiates it for VP8): each video
/// frame gets FEC packets in proportion to the loss the peer reports and the round trip, so that
/// a lost packet is rebuilt with no round trip where a NACK would cost one (and a second when
/// the retransmission is lost too: at 10 % loss and 100 ms that is what froze the picture).
///
/// FEC is made from packets as they leave the pacer (stamped with their transport-wide
/// numbers, which the receiver's copy carries too), but its sequence numbers are set aside when
/// the frame is packetized, right after the frame's own: the FEC packets then go out in order
/// ahead of any video still queued (the pacer's FEC lane, after retransmissions), and a
/// receiver never sees them as reordering. A frame is cut into groups of at most 48 consecutive packets (a mask's reach);
/// within a group FEC packet j protects every m-th packet from the j-th, so that a burst of m
/// losses in a row is still repaired.
struct FECProtector: Sendable {
    let mediaPayloadType: UInt8
    let redPayloadType: UInt8
    let fecPayloadType: UInt8
    /// FEC packets per media packet (0: none).
    private(set) var rate = 0.0

    private struct Plan {
        var timestamp: UInt32
        var mediaCount: Int
        /// FEC packets for each group (the rate may change before the frame has left).
        var counts: [Int]
        var fecSequences: [UInt16]
        var sent: [[UInt8]] = []
    }
    /// Frames packetized but not yet all sent, oldest first.
    private var plans: [Plan] = []
    /// The last 512 FEC sequence numbers (seconds of video): a NACK for one asks for no media.
    private var fecSequences: Set<UInt16> = []
    private var fecOrder: [UInt16] = []
    private(set) var fecPacketsSent = 0

    init(mediaPayloadType: UInt8, redPayloadType: UInt8, fecPayloadType: UInt8) {
        (self.mediaPayloadType, self.redPayloadType, self.fecPayloadType) = (mediaPayloadType, redPayloadType, fecPayloadType)
    }

    /// The protection for a loss fraction the peer reports and a round trip: none under 1 %
    /// loss, where NACK alone repairs what little is lost; then 2.5 FEC packets for each packet
    /// lost at a round trip of 40 ms or more (a retransmission is late there), 1.5 at a shorter
    /// one (a retransmission is nearly as quick, and costs only what was lost), at most one for
    /// every two media packets.
    static func rate(loss: Double, roundTripTime: Duration) -> Double {
        guard loss >= 0.01 else { return 0 }
        return min(0.5, loss * (roundTripTime >= .milliseconds(40) ? 2.5 : 1.5))
    }

    /// The loss the peer reported, followed at once when it rises and by a fifth of each step
    /// when it falls: a second's report at 10 % loss says anything from 5 to 15 %.
    private var loss = 0.0

    /// A receiver report on our video: the rate, in steps of 5 %.
    mutating func update(loss reported: Double, roundTripTime: Duration) {
        loss = reported >= loss ? reported : loss + (reported - loss) / 5
        rate = (Self.rate(loss: loss, roundTripTime: roundTripTime) * 20).rounded() / 20
    }

    /// How many FEC packets a group of `count` media packets gets: the rate's share, rounded,
    /// one at least while protecting.
    func fecCount(forGroupOf count: Int) -> Int {
        guard rate > 0, count > 0 else { return 0 }
        return max(1, Int((Double(count) * rate).rounded()))
    }

    /// The groups of a frame of `count` packets (each at most a mask's reach).
    static func groups(_ count: Int) -> [Range<Int>] {
        stride(from: 0, to: count, by: ULPFECPayload.maxSpan).map { $0..<min(count, $0 + ULPFECPayload.maxSpan) }
    }

    /// A frame of `mediaCount` packets was packetized: how many sequence numbers to set aside
    /// for its FEC, which start at `firstFECSequence`.
    mutating func plan(timestamp: UInt32, mediaCount: Int, firstFECSequence: UInt16) -> Int {
        let counts = Self.groups(mediaCount).map { fecCount(forGroupOf: $0.count) }
        let count = counts.reduce(0, +)
        guard count > 0 else { return 0 }
        let numbers = (0..<count).map { firstFECSequence &+ UInt16($0) }
        fecSequences.formUnion(numbers)
        fecOrder += numbers
        if fecOrder.count > 512 {
            fecSequences.subtract(fecOrder.prefix(fecOrder.count - 512))
            fecOrder.removeFirst(fecOrder.count - 512)
        }
        plans.append(Plan(timestamp: timestamp, mediaCount: mediaCount, counts: counts, fecSequences: numbers))
        if plans.count > 64 { plans.removeFirst() }
        return count
    }

    /// Whether `sequenceNumber` was set aside for FEC lately (a NACK for it asks for nothing).
    func isFEC(_ sequenceNumber: UInt16) -> Bool { fecSequences.contains(sequenceNumber) }

    /// The media payload inside RED, for the wire.
    func wrap(_ packet: RTPPacket) -> RTPPacket {
        var wire = packet
        wire.payloadType = redPayloadType
        wire.payload = [mediaPayloadType] + packet.payload
        return wire
    }

    /// A video packet left the pacer as it goes on the wire (in RED): once a planned frame's
    /// packets have all left, its FEC packets, in RED, to send at once.
    mutating func sent(_ wire: RTPPacket) -> [RTPPacket] {
        guard wire.payloadType == redPayloadType, wire.payload.first == mediaPayloadType,
              let index = plans.firstIndex(where: { $0.timestamp == wire.timestamp }) else { return [] }
        // Older frames whose packets did not all leave (the pacer dropped some) get none.
        plans.removeFirst(index)
        var media = wire
        media.payloadType = mediaPayloadType
        media.payload.removeFirst()
        plans[0].sent.append(media.serialized())
        guard plans[0].sent.count == plans[0].mediaCount else { return [] }
        let plan = plans.removeFirst()
        var out: [RTPPacket] = []
        var numbers = plan.fecSequences.makeIterator()
        for (group, count) in zip(Self.groups(plan.mediaCount), plan.counts) {
            let members = Array(plan.sent[group])
            for j in 0..<count {
                let protected = stride(from: j, to: members.count, by: count).map { members[$0] }
                guard let number = numbers.next(), let fec = ULPFECPayload(protecting: protected) else { continue }
                out.append(RTPPacket(payloadType: redPayloadType, sequenceNumber: number, timestamp: wire.timestamp, ssrc: wire.ssrc,
                                     payload: [fecPayloadType] + fec.serialized()))
            }
        }
        fecPacketsSent += out.count
        return out
    }
}
