/// Receiver side of transport-wide congestion control feedback
/// (draft-holmer-rmcat-transport-wide-cc-extensions-01): records the arrival time of every packet
/// carrying a transport-wide sequence number and, when asked (every 50–100 ms), returns feedback
/// covering everything since the last one. Pure: arrival times are passed in.
public struct TransportFeedbackGenerator: Sendable {
    public let senderSSRC: UInt32
    public let mediaSSRC: UInt32
    /// Feedback covers at most this many sequence numbers; older ones are dropped.
    public var maxPacketsPerFeedback = 500

    private var unwrapper = SequenceUnwrapper()
    private var arrivals: [Int64: Int64] = [:]
    private var nextToReport: Int64?
    private var feedbackCount: UInt8 = 0

    public init(senderSSRC: UInt32, mediaSSRC: UInt32) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
    }

    /// A packet with transport sequence number `sequence` arrived at `arrivalMicroseconds`.
    public mutating func received(sequence: UInt16, arrivalMicroseconds: Int64) {
        let unwrapped = unwrapper.unwrap(sequence)
        if let next = nextToReport, unwrapped < next { return }  // already reported as lost or received
        arrivals[unwrapped] = arrivalMicroseconds
        if nextToReport == nil { nextToReport = unwrapped }
    }

    /// Feedback packets for everything received since the last call (several when a gap in
    /// arrival times does not fit one packet's 16-bit deltas); empty when nothing new arrived.
    public mutating func makeFeedback() -> [TransportCCFeedback] {
        guard var start = nextToReport, let last = arrivals.keys.max(), last >= start else { return [] }
        if last - start + 1 > Int64(maxPacketsPerFeedback) { start = last - Int64(maxPacketsPerFeedback) + 1 }
        var out: [TransportCCFeedback] = []
        var base = start
        while base <= last {
            // Grow the packet while its deltas fit; on a gap too wide, close it and start a new one.
            var end = min(last, base + Int64(maxPacketsPerFeedback) - 1)
            var feedback: TransportCCFeedback?
            while end >= base {
                let times = (base...end).map { arrivals[$0] }
                if times.last! != nil, let fb = TransportCCFeedback(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, feedbackPacketCount: feedbackCount,
                                                                    base: UInt16(truncatingIfNeeded: base), arrivals: times) {
                    feedback = fb
                    break
                }
                end -= 1
            }
            guard let feedback else { break }
            out.append(feedback)
            feedbackCount &+= 1
            base = end + 1
        }
        for key in arrivals.keys where key < base { arrivals[key] = nil }
        nextToReport = base
        return out
    }
}

/// Sender side: remembers when and how big each packet with a transport-wide sequence number was
/// sent, and turns feedback into per-packet results for the bandwidth estimator.
public struct TransportFeedbackAdapter: Sendable {
    public struct Result: Sendable, Equatable {
        public var sequence: UInt16
        public var size: Int
        /// Send time on the sender's clock, microseconds.
        public var sent: Int64
        /// Arrival on the receiver's clock, microseconds; nil when the feedback reports it lost.
        public var arrived: Int64?
    }

    private var sent: [UInt16: (time: Int64, size: Int)] = [:]
    private var order: [UInt16] = []
    public var capacity = 4096
    /// Bytes sent after the newest packet any feedback has covered: what is still in the path.
    public private(set) var outstandingBytes = 0
    /// Send time of the newest packet feedback has covered, and when that feedback came.
    public private(set) var newestReported: (sent: Int64, at: Int64)?
    /// From sending a packet to the feedback that covers it, over the last 10 s.
    private var feedbackDelays: [(at: Int64, delay: Int64)] = []
    /// The shortest of those: the path's round trip plus the feedback interval, without queueing.
    public var shortestFeedbackDelay: Int64? { feedbackDelays.lazy.map { $0.delay }.min() }
    /// The shortest over the last second only: with a queue another flow keeps full, the round
    /// trip the path has now.
    public var recentFeedbackDelay: Int64? {
        guard let newest = feedbackDelays.last?.at else { return nil }
        return feedbackDelays.lazy.filter { $0.at >= newest - 1_000_000 }.map { $0.delay }.min()
    }

    public init() {}

    public mutating func packetSent(sequence: UInt16, size: Int, atMicroseconds time: Int64) {
        if sent[sequence] == nil { order.append(sequence) }
        sent[sequence] = (time, size)
        if order.count > capacity { sent[order.removeFirst()] = nil }
        outstandingBytes += size
    }

    /// Results for the packets a feedback packet covers that this sender remembers, in sequence
    /// order. `now` updates what is still outstanding.
    public mutating func results(for feedback: TransportCCFeedback, now: Int64? = nil) throws(ParseError) -> [Result] {
        let results: [Result] = try feedback.arrivals().compactMap { entry in
            guard let record = sent[entry.sequenceNumber] else { return nil }
            return Result(sequence: entry.sequenceNumber, size: record.size, sent: record.time, arrived: entry.arrival)
        }
        if let now, let newest = results.map(\.sent).max(), newest >= newestReported?.sent ?? .min {
            newestReported = (newest, now)
            feedbackDelays.append((now, now - newest))
            feedbackDelays.removeAll { $0.at < now - 10_000_000 }
            outstandingBytes = 0
            for sequence in order.reversed() {
                guard let record = sent[sequence], record.time > newest else { break }
                outstandingBytes += record.size
            }
        }
        return results
    }
}
