/// Sender side of retransmission: keeps recently sent packets and answers NACKs. Requests are
/// deduplicated (a packet resent less than a round trip ago is not resent again), capped per
/// call, and when the loss is too deep to repair the history says so, so that the sender sends a
/// keyframe instead of a flood of retransmissions (the failure mode DESIGN.md measured in aiortc).
/// Pure: time is passed in.
public struct RetransmissionHistory: Sendable {
    public struct Entry: Sendable {
        public var packet: RTPPacket
        public var sentAt: Duration
        public var lastResentAt: Duration?
    }

    public struct Answer: Sendable {
        /// Packets to send again, through the pacer.
        public var packets: [RTPPacket]
        /// Asked-for packets no longer held (too old).
        public var unavailable: Int
        /// The request asked for more than can usefully be repaired: send a keyframe.
        public var keyframeInstead: Bool
    }

    public let capacity: Int
    public var maxAge: Duration
    /// At most this many packets resent for one NACK.
    public var maxPerRequest: Int

    private var entries: [UInt16: Entry] = [:]
    private var order: [UInt16] = []
    private var head = 0

    public private(set) var resent = 0
    public private(set) var suppressedDuplicates = 0

    public init(capacity: Int = 1000, maxAge: Duration = .seconds(1), maxPerRequest: Int = 100) {
        self.capacity = capacity
        self.maxAge = maxAge
        self.maxPerRequest = maxPerRequest
    }

    public mutating func store(_ packet: RTPPacket, sentAt: Duration) {
        if entries[packet.sequenceNumber] == nil { order.append(packet.sequenceNumber) }
        entries[packet.sequenceNumber] = Entry(packet: packet, sentAt: sentAt, lastResentAt: nil)
        while order.count - head > capacity {
            entries[order[head]] = nil
            head += 1
        }
        if head > 4096 {
            order.removeFirst(head)
            head = 0
        }
    }

    /// The `offset`-th most recently stored packet (0 is the newest): what a probe sends again as
    /// padding, so that its packets are full size (RTP padding alone is at most 255 bytes, and a
    /// token bucket lets many small packets through at line rate).
    public func recent(_ offset: Int) -> RTPPacket? {
        let index = order.count - 1 - offset
        guard offset >= 0, index >= head else { return nil }
        return entries[order[index]]?.packet
    }

    public mutating func answer(_ requested: [UInt16], now: Duration, roundTripTime: Duration) -> Answer {
        var packets: [RTPPacket] = []
        var unavailable = 0
        for sequence in requested {
            guard var entry = entries[sequence], now - entry.sentAt <= maxAge else {
                unavailable += 1
                continue
            }
            // Within three quarters of a round trip of the last resend, a request is one that
            // crossed it (or its repeat): a retry after a lost resend comes a round trip later.
            if let last = entry.lastResentAt, now - last < max(roundTripTime * 3 / 4, .milliseconds(10)) {
                suppressedDuplicates += 1
                continue
            }
            guard packets.count < maxPerRequest else { break }
            // A retry says the path lost the last resend: this one goes twice, so that a hole
            // needs a third round trip (at 10 % loss and 100 ms, a freeze) one time in a
            // hundred, not one in ten. Only the few packets whose resend was lost cost double,
            // and only where a round trip is long (20 ms or more): at 1 ms another retry comes
            // 10 ms later, and in a fade of 40 % loss the copies took a third of the repairs.
            let copies = entry.lastResentAt == nil || roundTripTime < .milliseconds(20) ? 1 : 2
            entry.lastResentAt = now
            entries[sequence] = entry
            packets += repeatElement(entry.packet, count: copies)
        }
        resent += packets.count
        let tooDeep = requested.count > maxPerRequest || (unavailable > 0 && unavailable * 2 >= requested.count)
        return Answer(packets: packets, unavailable: unavailable, keyframeInstead: tooDeep)
    }
}

/// RTP retransmission payload format (RFC 4588 §4): the retransmitted packet travels on its own
/// SSRC and payload type with its own sequence numbers; its payload is the original sequence
/// number (OSN) followed by the original payload. Chosen over same-SSRC resending so that loss
/// statistics and the jitter estimate of the media stream see each packet once.
public enum RTX {
    public static func wrap(_ original: RTPPacket, ssrc: UInt32, payloadType: UInt8, sequenceNumber: UInt16) -> RTPPacket {
        var packet = RTPPacket(payloadType: payloadType, sequenceNumber: sequenceNumber, timestamp: original.timestamp,
                               ssrc: ssrc, marker: original.marker, csrcs: original.csrcs)
        packet.extensionProfile = original.extensionProfile
        packet.extensionData = original.extensionData
        packet.payload = [UInt8(original.sequenceNumber >> 8), UInt8(original.sequenceNumber & 0xff)] + original.payload
        return packet
    }

    public static func unwrap(_ rtx: RTPPacket, mediaSSRC: UInt32, mediaPayloadType: UInt8) throws(ParseError) -> RTPPacket {
        guard rtx.payload.count >= 2 else { throw ParseError("RTX payload", "shorter than its 2-byte original sequence number") }
        var packet = RTPPacket(payloadType: mediaPayloadType, sequenceNumber: UInt16(rtx.payload[0]) << 8 | UInt16(rtx.payload[1]),
                               timestamp: rtx.timestamp, ssrc: mediaSSRC, marker: rtx.marker, csrcs: rtx.csrcs)
        packet.extensionProfile = rtx.extensionProfile
        packet.extensionData = rtx.extensionData
        packet.payload = Array(rtx.payload[2...])
        return packet
    }
}
