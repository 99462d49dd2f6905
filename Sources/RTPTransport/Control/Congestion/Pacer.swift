/// Spreads packets over time at a pacing rate, so a video frame does not burst into the
/// bottleneck queue: a leaky bucket whose budget grows with the rate and may run at most a few
/// milliseconds ahead. Audio leaves first, then retransmissions, then FEC, then video.
/// Retransmissions go through here like everything else, so they are paced and counted; while
/// `repairRate` is set they also have a bucket of their own at that rate, beside the media's.
/// When packets have waited too long (a keyframe after a rate drop), the rate rises just enough
/// to empty the queue within `maxQueueTime`. During a probe cluster the rate is the probe's and the pacer asks for
/// padding when it has nothing to send. Pure: times are microseconds passed in.
public struct Pacer<Item: Sendable>: Sendable {
    public enum Priority: Int, Sendable, Comparable {
        case audio = 0, retransmission, protection, video, padding
        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    public struct Entry: Sendable {
        public var item: Item
        public var size: Int
        public var priority: Priority
        public var enqueued: Int64
        /// The probe cluster the packet was sent in, if any.
        public var probe: BandwidthEstimator.ProbeCluster?
    }

    /// Bits per second.
    public var pacingRate: Int
    public var maxQueueTime: Int64 = 250_000
    /// The most the queue-emptying rise may reach, bit/s: under congestion a backlog sent at any
    /// speed only moves the queue into the bottleneck, so the sender caps it near the estimate.
    public var maxDrainRate = Int.max
    /// How far ahead of the rate the pacer may run (a small burst allowance).
    public var burstTime: Int64 = 5_000
    /// While set, only audio leaves (a congestion window: the path already holds too much).
    public var holdVideo = false
    /// Bits per second retransmissions may take beyond the pacing rate (their own bucket, spent
    /// first): zero while the path is congested.
    public var repairRate = 0
    private var queues: [[Entry]] = [[], [], [], [], []]
    private var budget = 0.0
    private var repairBudget = 0.0
    private var lastTime: Int64?
    private var probe: (cluster: BandwidthEstimator.ProbeCluster, until: Int64)?
    public private(set) var queuedBytes = 0
    /// The most packets queued at once (about 2.4 MB of full-size packets, 8 s of video at
    /// 2.5 Mbit/s): a path that takes nothing for long (a congestion window that stays shut) or a
    /// flood of retransmission requests cannot grow the queue without end.
    public var maxPackets = 2048
    /// Packets dropped at that bound, oldest of the lowest priority first. A dropped video packet
    /// leaves a picture the receiver cannot decode: the sender should follow with a keyframe.
    public private(set) var droppedPackets = 0

    public init(pacingRate: Int) { self.pacingRate = pacingRate }

    public var isEmpty: Bool { queues.allSatisfy { $0.isEmpty } }  // a closure: a key path on this generic type is built at run time on every call
    public var count: Int { queues.reduce(0) { $0 + $1.count } }

    public mutating func enqueue(_ item: Item, size: Int, priority: Priority, now: Int64) {
        queues[priority.rawValue].append(Entry(item: item, size: size, priority: priority, enqueued: now))
        queuedBytes += size
        var excess = count - maxPackets
        guard excess > 0 else { return }
        for p in stride(from: queues.count - 1, through: 0, by: -1) where excess > 0 {
            let n = min(excess, queues[p].count)
            queuedBytes -= queues[p].prefix(n).reduce(0) { $0 + $1.size }
            queues[p].removeFirst(n)
            droppedPackets += n
            excess -= n
        }
    }

    /// How long the oldest queued packet has waited.
    public func queueDelay(now: Int64) -> Int64 {
        queues.compactMap { $0.first?.enqueued }.min().map { now - $0 } ?? 0
    }

    /// Starts a probe. The burst allowance saved up before it goes out at its start, on purpose:
    /// it spends a token bucket's allowance in the probe's first half, so the later half, which
    /// is what is measured, sees the link. (Started from an empty budget, a probe at 1.1x a
    /// 1 Mbit/s link passed a 4 kB bucket whole, was read as carried, and raised the estimate
    /// above the link every few seconds.)
    public mutating func startProbe(_ cluster: BandwidthEstimator.ProbeCluster, now: Int64) {
        probe = (cluster, now + cluster.duration)
    }

    public var probing: Bool { probe != nil }
    public var currentProbe: BandwidthEstimator.ProbeCluster? { probe?.cluster }

    /// The rate in force now: the probe's, or the pacing rate raised to empty a queue that has
    /// waited too long.
    public func effectiveRate(now: Int64) -> Int {
        // A probe's rate, even below the pacing rate: padding fills up to it, and a gentle probe
        // just above the estimate must not go out at a pacing rate above it.
        if let probe, now < probe.until { return probe.cluster.bitrate }
        let waited = queueDelay(now: now)
        guard waited > maxQueueTime / 2 else { return pacingRate }
        let remaining = max(20_000, maxQueueTime - waited)
        return max(pacingRate, min(maxDrainRate, Int(Double(queuedBytes * 8) * 1_000_000 / Double(remaining))))
    }

    private mutating func refill(now: Int64) {
        if probe.map({ now >= $0.until }) == true { probe = nil }
        let rate = Double(effectiveRate(now: now))
        let allowance = rate / 8 * Double(burstTime) / 1_000_000 + 1_500
        let repair = Double(repairRate), repairAllowance = repair / 8 * Double(burstTime) / 1_000_000 + 1_500
        if let last = lastTime {
            budget = min(budget + rate / 8 * Double(now - last) / 1_000_000, allowance)
            repairBudget = repair > 0 ? min(repairBudget + repair / 8 * Double(now - last) / 1_000_000, repairAllowance) : 0
        } else {
            budget = allowance
            repairBudget = repair > 0 ? repairAllowance : 0
        }
        lastTime = now
    }

    /// The next packet to send now, or nil when the budget is spent or nothing waits. Audio is
    /// never held back by the budget (it is small and late audio is useless).
    public mutating func next(now: Int64) -> Entry? {
        refill(now: now)
        if var audio = queues[Priority.audio.rawValue].first {
            queues[Priority.audio.rawValue].removeFirst()
            return sent(&audio)
        }
        if repairBudget > 0, !holdVideo, var repair = queues[Priority.retransmission.rawValue].first {
            queues[Priority.retransmission.rawValue].removeFirst()
            repairBudget -= Double(repair.size)
            budget += Double(repair.size)  // not the media's to pay
            return sent(&repair)
        }
        guard budget > 0, !holdVideo else { return nil }
        for p in 1..<queues.count where !queues[p].isEmpty {
            var entry = queues[p].removeFirst()
            return sent(&entry)
        }
        return nil
    }

    private mutating func sent(_ entry: inout Entry) -> Entry {
        queuedBytes -= entry.size
        budget -= Double(entry.size)
        entry.probe = probe?.cluster
        return entry
    }

    /// Bytes of padding to send now to keep a probe at its rate (nil when not probing or when
    /// media is waiting): a full-size packet whenever the budget allows one, as for media. (Asked
    /// every millisecond for what the budget held, a probe below 2 Mbit/s went out as 200-byte
    /// packets; their headers took a share of the link that media does not, and a 2x probe on
    /// a 1 Mbit/s link measured 830 kbit/s.)
    public mutating func paddingWanted(now: Int64) -> Int? {
        refill(now: now)
        guard probe != nil, isEmpty, budget > 0 else { return nil }
        return VP8Packetizer.defaultMaxPayloadSize
    }

    /// Accounts for a padding packet sent outside the queue.
    public mutating func paddingSent(size: Int) { budget -= Double(size) }

    /// Microseconds until the budget allows the next non-audio packet.
    public func timeUntilNext(now: Int64) -> Int64 {
        guard budget <= 0 else { return 0 }
        let rate = Double(max(1, effectiveRate(now: now)))
        let media = Int64(-budget * 8 / rate * 1_000_000) + 1
        guard repairRate > 0, !queues[Priority.retransmission.rawValue].isEmpty else { return media }
        return min(media, repairBudget > 0 ? 0 : Int64(-repairBudget * 8 / Double(repairRate) * 1_000_000) + 1)
    }
}
