/// Send-side bandwidth estimation: the delay-based detector (queue growth), a loss-based bound
/// (RFC 8836-style: more than 10 % loss cuts the rate, under 2 % lets it grow), the bitrate the
/// receiver acknowledges, and probing: a probe cluster is a short burst at a multiple of the
/// estimate whose delivered rate (read from its later half, past a token bucket's allowance)
/// becomes the new estimate at once, so the rate climbs in seconds at the start and after a
/// drop instead of creeping up by 8 % a second. Near a capacity the path has shown, probes go
/// only a little above the estimate and step up while the path carries them. The lower of the
/// delay and loss estimates wins.
/// Pure: times are microseconds on the sender's clock, passed in.
public struct BandwidthEstimator: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var startBitrate = 300_000
        public var minBitrate = 50_000
        public var maxBitrate = 2_500_000
        /// Probe rates at the start, as multiples of the start bitrate.
        public var initialProbes: [Double] = [3, 6]
        /// Later probes go to this multiple of the estimate...
        public var probeMultiple = 2.0
        /// ...or, while the estimate is near a capacity the path has shown, these multiples, one
        /// step further after each probe the path carried (a probe at twice a full link's rate
        /// leaves a queue as long as the probe); a first probe carried well past the capacity
        /// skips the repeated small step.
        public var gentleProbeMultiples = [1.25, 1.25, 1.5]
        public var probeDuration: Int64 = 50_000
        /// A probe lasts long enough to carry this much, so that the later half of it, which is
        /// what is measured, comes after a token bucket's burst allowance.
        public var probeMinimumBytes = 12_000
        /// Minimum time between later probes; doubled after a full (2x) probe found no more room.
        public var probeInterval: Int64 = 1_000_000
        public init() {}
    }

    public enum Cause: String, Sendable, Codable {
        case delay, loss, probe, increase, start
        /// Another sender keeps the bottleneck's queue full (a TCP download): the estimate
        /// takes back what it cut for that queue, and loss rules until the queue drains.
        case competing
        /// The receiver's REMB capped the estimate (`ReportedLossEstimator`).
        case remb
    }

    /// A change of the estimate and why.
    public struct Change: Sendable, Equatable {
        public var time: Int64
        public var cause: Cause
        public var from: Int
        public var to: Int
    }

    /// A burst the pacer should send at `bitrate` for `duration`, tagging its packets with `id`.
    public struct ProbeCluster: Sendable, Equatable {
        public var id: Int
        public var bitrate: Int
        public var duration: Int64
    }

    public let configuration: Configuration
    public private(set) var estimate: Int
    public private(set) var delay = DelayBasedDetector()
    /// Bitrate the receiver acknowledged over the last 250 ms of arrivals, bit/s.
    public private(set) var acknowledgedBitrate: Int?
    /// The same over the last 100 ms (nil with fewer than 5 packets in it).
    public private(set) var recentBitrate: Int?
    /// Loss fraction over the last second of feedback.
    public private(set) var lossFraction = 0.0
    /// The loss the path has without any queue (a radio link, a lossy hop): a slow average (5 s)
    /// of the loss seen while the queue stays under 10 ms and the detector sees no overuse. Loss
    /// that congestion causes comes with a queue (a full buffer drops), so it does not feed this.
    /// Loss up to this (read as at most 20 %) is not answered by the loss-based bound: random
    /// loss at 10 % ratcheted the rate down a cut every 0.3 s to the minimum, where libwebrtc
    /// keeps 640x480. A policer that drops without queueing is read as inherent loss too, up to
    /// the 20 % where cuts begin again.
    public private(set) var inherentLoss = 0.0
    /// The path holds packets and hands them over in bursts: a cellular link's scheduler (tens to
    /// hundreds of ms between grants, seconds in a fade) or Wi-Fi's aggregation. Seen as holds:
    /// a packet arriving `holdThreshold` or more later after the one sent before it than it was
    /// sent after it, at least `burstyHolds` times within `burstyMemory`. A wired bottleneck
    /// spaces packets by their size at its rate (16 ms for 1200 bytes at 600 kbit/s), never
    /// that far. On such a path the delay a hold adds is not a queue this sender built: cuts
    /// are bounded by the smoothed throughput (`throughput`), none is made in an outage, the rate
    /// comes back by recovery probes, and the congestion window does not hold video (feedback
    /// comes in bursts too).
    public var burstyLink: Bool { holds.count >= Self.burstyHolds }
    private var holds: [Int64] = []
    private var previousArrival: (sent: Int64, arrived: Int64)?
    static let holdThreshold: Int64 = 40_000
    static let burstyHolds = 3
    static let burstyMemory: Int64 = 10_000_000
    /// What the receiver acknowledged over the last second of arrivals, bit/s: over a second a
    /// cellular link's holds and the bursts after them average out to its rate (over 100-250 ms
    /// a hold read as a rate near zero). Nil before a second's arrivals.
    public private(set) var throughput: Double?
    private var longArrivals: [(time: Int64, size: Int)] = []
    static let throughputSpan: Int64 = 1_000_000
    /// Acknowledged throughput under this share of the estimate on a bursty link is an outage.
    static let outageShare = 0.1
    /// Where a bursty link's rate returns after a deep cut, as a share of the rate before it.
    static let burstyRecovery = 0.6
    static let inherentLossCeiling = 0.2
    public private(set) var changes: [Change] = []

    private var lossBound: Int
    /// When the estimate was last cut for delay or loss (the sender paces tighter for a while).
    public private(set) var lastDecrease: Int64?
    /// The queueing delay at the last delay cut: while the queue shrinks from there, the cut is
    /// working and another would only undershoot.
    private var queueAtDecrease = 0.0
    /// The capacity the path has shown (at the last delay cut, or by a probe it could not carry):
    /// the additive increase slows near it and probes there are gentle.
    private var capacityEstimate: Double?
    private var lastUpdate: Int64?
    private var arrivals: [(time: Int64, size: Int)] = []
    private var lossWindow: [(time: Int64, lost: Bool)] = []
    private var lastLossChange: Int64?
    /// Send time of the last loss cut: only packets sent after it judge the new rate.
    private var lossCutSent: Int64 = .min
    private var pendingProbes: [ProbeCluster] = []
    private var nextProbeID = 1
    private var lastProbeAt: Int64?
    private var lastRecoveryProbe: Int64?
    private var probeBackoff: Int64 = 1
    /// Bytes of each probe after its first packet (the span from first to last send carries
    /// those), the first and last send times, and the cluster.
    private var probeSent: [Int: (bytes: Int, first: Int64, last: Int64, cluster: ProbeCluster)] = [:]
    /// Arrivals of each probe's packets (a lost one is nil).
    private var probeReceived: [Int: [(arrived: Int64, size: Int)?]] = [:]
    private var probeSequences: [UInt16: Int] = [:]
    /// The estimate before the last probe raised it, and when: a probe that only filled a
    /// token bucket's burst allowance is followed by overuse, and is then undone.
    private var beforeProbe: (estimate: Int, time: Int64)?
    /// After a cut made deeper to drain a standing queue: the rate to return to once it has.
    private var recoverTo: Int?
    private var lastJudgedProbe = 0
    private var probeQueueUntil: Int64?
    /// When a probe or the end of a drain last raised the estimate in one step.
    private var lastJump: Int64?
    /// Which of the gentle multiples the next probe near capacity uses.
    private var gentleLevel = 0
    /// Sharing the bottleneck with a loss-based flow (a TCP download): cuts for delay do not
    /// drain a queue another sender keeps full, and a delay-based sender that goes on cutting
    /// for it starves (RFC 8867 §5.6). While this holds, delay neither cuts nor holds the
    /// estimate; loss does (the competing rule in `updateDelayBased`), as it does TCP's.
    public private(set) var competing = false
    /// The queue the path holds, ms, as the send policy reads it: the delay detector's, or
    /// unbounded while competing (the other sender keeps the buffer full longer than the
    /// detector's 10 s base window, so its figure reads low).
    public var pathQueueDelay: Double { competing ? .infinity : delay.queueDelay }
    /// Since when the queue has stood over `standingQueue` ms without a break, the delay cuts
    /// made meanwhile, and the estimate before it began.
    private var standingSince: Int64?
    private var cutsWhileStanding = 0
    private var estimateBeforeStanding: Int?
    /// The estimate every 100 ms over the last 6 s: the competing state returns to half of its
    /// highest, the rate from before the other sender came. (Not the estimate when the queue
    /// first stood at 80 ms: a download that arrives fast takes its share at once, and the cut
    /// for what still arrives comes before that. Nor the one before the first cut after 2 s
    /// without one: at a full link the creep's small cuts come every second or so, and in two
    /// long runs of three the call came back to 0.1-0.25 of the link, not half.)
    private var recentEstimates: [(time: Int64, estimate: Int)] = []
    /// A queue this long (ms) that stands 2 s through two cuts or more is another sender's.
    static let standingQueue = 80.0
    /// While competing: the path's delay without queue from before the other sender came (the
    /// detector's own base follows a queue that stands 10 s), and since when the queue over it
    /// has been short.
    private var competingBase = 0.0
    private var drainedSince: Int64?
    /// Every 10 s while competing, the rate halves for 1.2 s (a full queue at the old rate
    /// drains in about 0.6 s, and its packets' feedback comes a queue later): a queue that
    /// drains then was this sender's own (the other has gone, or yields), and delay rules again.
    private var drainTest: (until: Int64, restore: Int)?
    private var nextDrainTest: Int64 = 0
    static let drainTestInterval: Int64 = 10_000_000
    private var lastCompetingCut: Int64?
    /// Set when the last update began competing: its change says so.
    private var enteredCompetition = false
    /// What the sender puts on the path that no feedback reports (its packets' lower headers,
    /// its RTCP), bit/s: taken off a capacity a probe measured.
    static let unreportedBitrate = 20_000
    /// While competing, a queue this short (ms) over the base from before says the other sender has gone.
    static let drainedQueue = 30.0

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        estimate = configuration.startBitrate
        lossBound = configuration.maxBitrate
        pendingProbes = configuration.initialProbes.enumerated().map { i, multiple in
            Self.cluster(id: i + 1, bitrate: min(configuration.maxBitrate, Int(Double(configuration.startBitrate) * multiple)), configuration)
        }
        nextProbeID = pendingProbes.count + 1
    }

    // MARK: Probing

    /// The next probe to send, if one is due (the start probes first, then periodic ones while
    /// the path is calm and the estimate is below the maximum).
    public mutating func probeToSend(now: Int64) -> ProbeCluster? {
        if !pendingProbes.isEmpty {
            lastProbeAt = now
            return pendingProbes.removeFirst()
        }
        if let probe = recoveryProbe(now: now) { return probe }
        guard estimate < configuration.maxBitrate, delay.usage == .normal, lossFraction < 0.02 + inherent else { return nil }
        if let last = lastProbeAt, now - last < configuration.probeInterval * probeBackoff { return nil }
        if let decrease = lastDecrease, now - decrease < 1_000_000 { return nil }
        lastProbeAt = now
        let nearCapacity = capacityEstimate.map { Double(estimate) > 0.7 * $0 } ?? false
        let gentle = configuration.gentleProbeMultiples
        let multiple = nearCapacity && gentleLevel < gentle.count ? gentle[gentleLevel] : configuration.probeMultiple
        let cluster = Self.cluster(id: nextProbeID, bitrate: min(configuration.maxBitrate * 6 / 5, Int(Double(estimate) * multiple)), configuration)
        nextProbeID += 1
        probeQueueUntil = now + cluster.duration + 150_000
        return cluster
    }

    /// On a bursty link, after the estimate fell below two thirds of its highest of the last
    /// few seconds (a fade, an outage, cuts for holds): a probe at twice the estimate (at most
    /// 0.85 of that highest), once the cuts have stopped for half a second and the queue no
    /// longer grows, and again each second while the estimate stays down. Without it the rate
    /// came back by the additive 8 % a second and by the probes' backoff: from 50 kbit/s after a
    /// 4 s outage, with 1.4 Mbit/s offered again, it took 7 s to leave the floor. (A probe
    /// straight to 0.85 of the highest overshot a link still in its fade and was cut again:
    /// more freezes on the ATT trace in `bench cellular`.)
    private mutating func recoveryProbe(now: Int64) -> ProbeCluster? {
        guard burstyLink, let high = recentEstimates.map(\.estimate).max(), Double(estimate) < 2.0 / 3 * Double(high),
              delay.usage != .overusing, lastDecrease.map({ now - $0 >= 500_000 }) ?? true,
              lastRecoveryProbe.map({ now - $0 >= 1_000_000 }) ?? true else { return nil }
        lastRecoveryProbe = now
        lastProbeAt = now
        let cluster = Self.cluster(id: nextProbeID, bitrate: min(Int(0.85 * Double(high)), 2 * estimate), configuration)
        nextProbeID += 1
        probeQueueUntil = now + cluster.duration + 150_000
        return cluster
    }

    private static func cluster(id: Int, bitrate: Int, _ configuration: Configuration) -> ProbeCluster {
        let carrying = Int64(configuration.probeMinimumBytes) * 8 * 1_000_000 / Int64(max(bitrate, 1))
        return ProbeCluster(id: id, bitrate: bitrate, duration: max(configuration.probeDuration, carrying))
    }

    /// The pacer sent a packet of probe `cluster`.
    public mutating func probePacketSent(_ cluster: ProbeCluster, sequence: UInt16, size: Int, at time: Int64) {
        let id = cluster.id
        guard id > lastJudgedProbe else { return }  // a straggler of a cluster already judged
        probeSequences[sequence] = id
        guard var s = probeSent[id] else {
            probeSent[id] = (0, time, time, cluster)
            return
        }
        s.bytes += size
        s.last = time
        probeSent[id] = s
        if probeSequences.count > 2000 { probeSequences.removeAll() }
    }

    // MARK: Feedback

    /// Per-packet results from transport-wide feedback, in sequence order. Returns the change of
    /// the estimate they caused, if any.
    @discardableResult
    public mutating func onFeedback(_ results: [TransportFeedbackAdapter.Result], now: Int64) -> Change? {
        let before = estimate
        var cause: Cause?
        for r in results {
            if r.sent >= lossCutSent { lossWindow.append((now, r.arrived == nil)) }
            if let id = probeSequences.removeValue(forKey: r.sequence) {
                probeReceived[id, default: []].append(r.arrived.map { ($0, r.size) })
            }
            guard let arrived = r.arrived else { continue }
            delay.update(sent: r.sent, arrived: arrived, size: r.size)
            arrivals.append((arrived, r.size))
            noteArrival(sent: r.sent, arrived: arrived, size: r.size)
        }
        if let newest = arrivals.last?.time {
            arrivals.removeAll { $0.time < newest - 250_000 }
            // Bytes after the first arrival over the span from it to the newest.
            func rate(_ window: ArraySlice<(time: Int64, size: Int)>) -> Int {
                Int(Double(window.dropFirst().reduce(0) { $0 + $1.size } * 8) * 1_000_000 / Double(newest - window.first!.time))
            }
            if let oldest = arrivals.first?.time, newest - oldest >= 100_000 { acknowledgedBitrate = rate(arrivals[...]) }
            let recent = arrivals.drop { $0.time < newest - 100_000 }
            recentBitrate = recent.count >= 5 && newest - recent.first!.time >= 50_000 ? rate(recent) : nil
        }
        lossWindow.removeAll { $0.time < now - 1_000_000 }
        if lossWindow.count >= 20 {
            lossFraction = Double(lossWindow.filter(\.lost).count) / Double(lossWindow.count)
            if delay.queueDelay < 10, delay.usage != .overusing {
                let elapsed = Double(min(now - (lastUpdate ?? now), 1_000_000)) / 1_000_000
                inherentLoss += (lossFraction - inherentLoss) * min(1, elapsed / 5)
            }
        }

        if let probe = finishedProbe(now: now), probe.rate > estimate {
            beforeProbe = probe.carried ? (estimate, now) : nil
            // A probe leaves its own queue behind; that is not overuse. (One a token bucket let
            // through whole is undone by the overuse the raised rate causes after this.)
            probeQueueUntil = now + 300_000
            estimate = min(probe.rate, configuration.maxBitrate)
            lastJump = now
            cause = .probe
        }
        if recentEstimates.last.map({ now - $0.time >= 100_000 }) ?? true { recentEstimates.append((now, estimate)) }
        if let first = recentEstimates.first, first.time < now - 6_000_000 { recentEstimates.removeAll { $0.time < now - 6_000_000 } }
        if let delayCause = updateDelayBased(now: now) { cause = cause ?? delayCause }
        if enteredCompetition {
            enteredCompetition = false
            cause = .competing
        }
        if let lossCause = updateLossBased(now: now) { cause = lossCause }
        lastUpdate = now
        estimate = max(configuration.minBitrate, min(estimate, lossBound, configuration.maxBitrate))
        guard estimate != before, let cause else { return nil }
        let change = Change(time: now, cause: cause, from: before, to: estimate)
        if cause != .increase { changes.append(change) }
        if changes.count > 200 { changes.removeFirst(changes.count - 200) }
        return change
    }

    /// Holds (for `burstyLink`) and the smoothed throughput, one received packet at a time.
    private mutating func noteArrival(sent: Int64, arrived: Int64, size: Int) {
        if let previous = previousArrival, sent > previous.sent {
            if (arrived - previous.arrived) - (sent - previous.sent) >= Self.holdThreshold { holds.append(arrived) }
            if let first = holds.first, first < arrived - Self.burstyMemory { holds.removeAll { $0 < arrived - Self.burstyMemory } }
        }
        if previousArrival.map({ sent > $0.sent }) ?? true { previousArrival = (sent, arrived) }
        longArrivals.append((arrived, size))
        if let first = longArrivals.first, first.time < arrived - Self.throughputSpan {
            longArrivals.removeFirst(longArrivals.prefix { $0.time < arrived - Self.throughputSpan }.count)
            throughput = Double(longArrivals.dropFirst().reduce(0) { $0 + $1.size } * 8) * 1_000_000 / Double(Self.throughputSpan)
        }
    }

    /// A finished probe that found more room than the estimate: the rate to take, and whether
    /// the path carried all of it (then a token bucket may have passed it whole, and the overuse
    /// that follows undoes it) or queued it (then its later half measured the capacity).
    private mutating func finishedProbe(now: Int64) -> (rate: Int, carried: Bool)? {
        var best: (rate: Int, carried: Bool)?
        for (id, reports) in probeReceived {
            // Judge a cluster once it has ended and every packet of it has been reported (feedback
            // in the middle of a probe covers only its first packets).
            guard let sent = probeSent[id], now > sent.first + sent.cluster.duration, !probeSequences.values.contains(id) else { continue }
            probeSent[id] = nil
            probeReceived[id] = nil
            lastJudgedProbe = max(lastJudgedProbe, id)
            let received = reports.compactMap { $0 }.sorted { $0.arrived < $1.arrived }
            let sentSpan = sent.last - sent.first
            guard received.count >= 5, sentSpan > 0 else { continue }
            // The rate is read from the later half of the arrivals: the first packets may pass a
            // bottleneck's token bucket at line rate before the queue starts to pace them.
            let later = received[(received.count / 2)...]
            let arrivalSpan = later.last!.arrived - later.first!.arrived
            guard arrivalSpan > 0 else { continue }
            let sendRate = Double(sent.bytes * 8) * 1_000_000 / Double(sentSpan)
            let receiveRate = Double(later.dropFirst().reduce(0) { $0 + $1.size } * 8) * 1_000_000 / Double(arrivalSpan)
            // Never more than the probe was meant to send: a burst that a full token bucket let
            // through at line rate says nothing about the rate behind the bucket.
            let delivered = min(sendRate, receiveRate, Double(sent.cluster.bitrate))
            // Judged against what the probe meant to send: media frames sent at the pacing rate
            // during a probe may raise its send rate above the probe's own.
            let carried = receiveRate >= 0.9 * min(sendRate, Double(sent.cluster.bitrate))
            // A little below what the path carried or its queue measured. (0.9 of a measured
            // capacity started every climb 10 % short, and creeping up the rest took seconds.)
            // A capacity its queue measured is shared with what no feedback reports: the headers
            // of the call's small audio packets (UDP, IP, link: about 17 kbit/s) and its RTCP,
            // including the feedback for media coming the other way. Those take a roughly fixed
            // rate, which matters at low capacities: at 500 kbit/s, 0.95 of what a queued probe
            // measured was over the link, and each such probe built a queue of 60-80 ms before
            // the cut that followed it.
            var rate = Int(delivered * 0.95) - (carried ? 0 : Self.unreportedBitrate)
            // A probe carried only a little past the capacity known (a token bucket passes one
            // just above the link whole) raises the estimate no further than that capacity: at
            // 600 kbit/s such probes put it 5-10 % over the link every two seconds, each followed
            // by a queue of 50-80 ms and a cut. A rise that small is left to the creep.
            if carried, let known = capacityEstimate, delivered <= 1.15 * known { rate = min(rate, Int(0.95 * known)) }
            // A probe sent before the last cut measured a path that has changed since (a capacity
            // drop during it): it raises nothing.
            let beforeCut = lastDecrease.map { sent.first < $0 } ?? false
            if !beforeCut, delivered > Double(estimate) * 1.1, rate > best?.rate ?? 0 { best = (rate, carried) }
            // A gentle probe costs little queue: near capacity it comes back every interval, so
            // a rise is found within about a second and a half.
            let gentle = Double(sent.cluster.bitrate) <= 1.6 * Double(estimate)
            if !carried {
                // The path could not carry the probe: that is its capacity; probe less often,
                // and gently while the estimate is near it.
                capacityEstimate = delivered
                probeBackoff = gentle ? 1 : 2
                gentleLevel = 0
            } else if delivered > Double(estimate) * 1.1 {
                // It carried all of it: there may be more. Past the capacity known so far (or
                // with none known), the next probe goes one step further, at once, except after
                // a first gentle step that got only a little past it: then it goes the same
                // small step again, half a second later (a token bucket passes a probe only a
                // little above the link whole, so such a probe may say nothing: at 600 kbit/s,
                // stepping to 1.5x after one queued up 100 ms every two seconds). Well past it
                // (by 15 %: the capacity has risen), the small step is skipped. Below it, that
                // was only room the estimate had left.
                probeBackoff = 1
                let known = capacityEstimate ?? 0
                if delivered > 1.05 * known {
                    // Clear only when the probe also arrived at its full rate: one the link
                    // slowed to its capacity (within the 10 % "carried" allows) measured it,
                    // and the capacity known from a cut is often 15-20 % low at 600 kbit/s.
                    let clearRise = delivered > 1.15 * known && receiveRate >= 0.98 * Double(sent.cluster.bitrate)
                    let firstStep = gentle && gentleLevel == 0
                    gentleLevel += firstStep && clearRise ? 2 : 1
                    lastProbeAt = firstStep && !clearRise ? now - configuration.probeInterval + 500_000 : nil
                }
            } else {
                probeBackoff = 1
            }
        }
        return best
    }

    private mutating func updateDelayBased(now: Int64) -> Cause? {
        let elapsed = Double(min(now - (lastUpdate ?? now), 1_000_000)) / 1_000_000
        // One full-size packet's time on the link at the rate to return to: after a capacity
        // drop each packet takes that much longer to cross, and the delay the detector measures
        // from its earlier minimum never falls below it (12 ms from 2.5 to 0.6 Mbit/s).
        let packetTime = recoverTo.map { Double(VP8Packetizer.defaultMaxPayloadSize * 8 * 1000) / Double(max($0, 1)) } ?? 0
        if let target = recoverTo, delay.queueDelay < 10 + packetTime {
            // The queue a deep cut was for has drained. (Not waiting for the trend to say so as
            // well: at the low rate after the cut its 20 points span a second or more, and with
            // a 50 ms path the sender sat at a third of the link for that long.)
            recoverTo = nil
            if target > estimate {
                estimate = target
                lastJump = now
                return .delay
            }
        }
        if delay.queueDelay > Self.standingQueue {
            if standingSince == nil { (standingSince, cutsWhileStanding, estimateBeforeStanding) = (now, 0, estimate) }
            if !competing, !burstyLink, let since = standingSince, now - since >= 2_000_000, cutsWhileStanding >= 2 {
                // The cuts drained nothing: the queue is another sender's. Back to half the rate
                // before it (two flows' fair share, when this one filled the link), from where
                // loss rules.
                competing = true
                competingBase = delay.accumulated - delay.queueDelay
                drainedSince = nil
                drainTest = nil
                nextDrainTest = now + Self.drainTestInterval
                let before = max(estimateBeforeStanding ?? estimate, recentEstimates.map(\.estimate).max() ?? estimate)
                estimate = max(estimate, before / 2)
                capacityEstimate = nil
                recoverTo = nil
                enteredCompetition = true
            }
        } else {
            standingSince = nil
        }
        if competing {
            // The other sender has gone once the queue over the base from before it has stayed
            // short for a second.
            let drained = delay.accumulated - competingBase < Self.drainedQueue
            if drained {
                if drainedSince == nil { drainedSince = now }
            } else {
                drainedSince = nil
            }
            if let test = drainTest {
                if drained {
                    // The queue was this sender's: from what gets through, delay rules again.
                    competing = false
                    drainTest = nil
                    estimate = max(estimate, Int(0.9 * Double(acknowledgedBitrate ?? estimate)))
                    return .delay
                }
                guard now >= test.until else { return nil }
                drainTest = nil
                nextDrainTest = now + Self.drainTestInterval
                estimate = max(estimate, test.restore)
                return .competing
            }
            if let since = drainedSince, now - since >= 1_000_000 {
                competing = false
            } else if now >= nextDrainTest {
                drainTest = (now + 1_200_000, estimate)
                estimate /= 2
                return .competing
            }
        }
        switch competing ? .normal : delay.usage {
        case .overusing:
            // One decrease per 200 ms: the queue needs time to answer; and within a second of a
            // cut, another only while the queue still grows (a draining queue keeps the trend
            // near zero and above its minimum for a while: cutting again then only undershoots).
            // A queue that has grown by another 20 ms since the last cut (a capacity drop still
            // filling it) may be cut again after 100 ms.
            let growing = delay.queueDelay > queueAtDecrease + 20
            if let last = lastDecrease, now - last < (growing ? 100_000 : 200_000) { return nil }
            // A probe's own queue is not overuse (at most its excess over the link: tens of ms);
            // a queue beyond that is, probe or not.
            if let until = probeQueueUntil, now < until, delay.queueDelay < 60 { return nil }
            if let last = lastDecrease, now - last < 1_000_000, delay.queueDelay < queueAtDecrease + 5 {
                // But a queue that has not shrunk 300 ms after a cut is standing, not draining:
                // the cut left the rate at the capacity (an undone probe returns to the rate
                // before it, which may be just that), and it is cut again, deeper for the queue.
                let standing = now - last >= 300_000 && delay.queueDelay > 25 && delay.queueDelay > queueAtDecrease - 10
                if !standing { return nil }
            }
            // What arrived over the last 100 ms, when the path is full, is its capacity now; the
            // 250 ms figure still holds some of the rate from before a capacity drop.
            var basis = Double(min(acknowledgedBitrate ?? estimate, recentBitrate ?? .max))
            // Within half a second of a jump up, what arrives still shows the rate from before
            // it: a cut from there would undo a good probe for a passing queue.
            if let raised = lastJump, now - raised < 500_000 { basis = max(basis, 0.85 * Double(estimate)) }
            if let probe = beforeProbe, now - probe.time < 2_000_000, probe.estimate < estimate {
                // Overuse right after a probe raised the estimate: the probe passed through a
                // burst allowance, or only just overshot. Back to where it was or to 90 % of what
                // gets through, whichever is more, less enough to drain the probe's queue within
                // a second (where it was may be just under the link, and the queue stood for a
                // second); the next probe is a gentle one (the capacity is known now), at the
                // usual interval.
                beforeProbe = nil
                probeBackoff = 1
                estimate = min(estimate, Int(Double(max(probe.estimate, Int(0.9 * basis))) * max(0.8, 1 - drainWithinASecond)))
                capacityEstimate = Double(estimate)
                markDecrease(now: now)
                return .delay
            }
            beforeProbe = nil
            // Far less gets through than is sent (the capacity fell): cut below what arrives.
            // A small overshoot at the top of the climb: cut less, so the average stays near
            // capacity. A standing queue is drained within about half a second: the deeper it
            // is, the deeper the cut, and once it has drained the rate returns to 90 % of what
            // got through.
            if burstyLink, let throughput {
                // An outage (under a tenth of the estimate acknowledged over the last second):
                // the delay is the link's hold, not a queue this rate built; cutting for it left
                // the rate at the floor when the link came back with megabits (ATT uplink).
                if throughput < Self.outageShare * Double(estimate) { return nil }
                // A hold read over 100-250 ms looks like a rate near zero; over a second it is
                // the link's.
                basis = max(basis, throughput)
            }
            // On a bursty link a cut is one step of 0.85: the queue depth measured there is the
            // scheduler's hold, and cutting deeper for it halved the rate each fade.
            let factor = burstyLink ? 0.85 : min(basis < 0.7 * Double(estimate) ? 0.85 : 0.92, max(0.35, 1 - delay.queueDelay / 400))
            var target = Int(factor * basis)
            // The creep just past the link: a short queue, a trend barely over its threshold and
            // nearly all of what is sent arriving, a second or more after the last cut (not a
            // queue standing after one). The cut takes back the overshoot (5 %) and enough to
            // drain the queue within a second, no more. (Cut from what arrives, which under-reads
            // a link that frames leave idle between them, the sawtooth went down to 0.85 of the
            // link: a 2.5 Mbit/s phase behind a 50 ms path was 0.87-0.90 used.)
            let calmSinceCut = lastDecrease.map { now - $0 >= 1_000_000 } ?? true
            if calmSinceCut, delay.queueDelay < 30, delay.trend < 2 * delay.threshold, basis >= 0.9 * Double(estimate) {
                target = max(target, Int((0.95 - drainWithinASecond) * Double(estimate)))
            }
            guard target < estimate else { return nil }
            if factor < 0.85 { recoverTo = Int(0.9 * basis) }
            if burstyLink, Double(target) < 0.5 * Double(estimate) {
                // Cut to under half on a bursty link (the throughput over a fade): back to 0.6 of
                // the rate before as soon as the queue has drained.
                recoverTo = max(recoverTo ?? 0, Int(Self.burstyRecovery * Double(estimate)))
            }
            estimate = target
            // The capacity is what got through at best: the cut is from the lower figure, to be
            // safe; the capacity from the higher one (an overuse spike while the sender was not
            // filling the path leaves a low 250 ms figure).
            capacityEstimate = Double(max(acknowledgedBitrate ?? 0, recentBitrate ?? 0, Int(basis)))
            markDecrease(now: now)
            return .delay
        case .underusing:
            return nil  // the queue drains; hold
        case .normal:
            var next = Double(estimate)
            // The capacity stays known until a cut or a probe measures it again: one taken from
            // a cut while the sender was not filling the path is low, and dropping it when the
            // estimate passed it made the next probe a full 2x one into a full link. (Probes
            // past it step up to 2x by themselves.)
            if competing {
                // Sharing with a loss-based flow: grow by 8 % a second while under 1.5 % is lost;
                // above 3 %, give up a tenth (more above 20 %), once a second. (Holding on to 5 %
                // as loss-based video does, the call took 0.78 of the link from a CUBIC download:
                // TCP halves its window at each loss, and at 300 ms round trips a few per cent
                // loss leaves it a few hundred kbit/s. Giving up a tenth above 2 %, growing only
                // under 1 %, the call drifted down to a third of the link and less.)
                if lossFraction > 0.03 {
                    if let last = lastCompetingCut, now - last < 1_000_000 { return nil }
                    lastCompetingCut = now
                    estimate = Int(Double(estimate) * min(0.9, 1 - 0.5 * lossFraction))
                    return .loss
                }
                guard lossFraction < 0.015 else { return nil }
                next *= pow108(elapsed)
            } else if let capacity = capacityEstimate, next > 0.7 * capacity {
                // Near the last known capacity: creep up (8 % of it per second), so the queue
                // that ends the climb stays short.
                next += max(10_000, 0.08 * capacity) * elapsed
            } else {
                next *= pow108(elapsed)
            }
            // Never far above what actually gets through.
            if let acknowledged = acknowledgedBitrate { next = min(next, 1.5 * Double(acknowledged) + 10_000) }
            guard Int(next) > estimate else { return nil }
            estimate = Int(next)
            return .increase
        }
    }

    /// The share of the rate to give up so that the queue the detector measures drains within a
    /// second (after a probe is undone, and at the top of the creep).
    private var drainWithinASecond: Double { delay.queueDelay / 1000 }

    /// A delay cut: the time and the queue it answered; and losses are judged afresh on packets
    /// sent after it (the queue that overflowed is what the cut answers: with a 100 ms round
    /// trip its drops cut the rate a second time, half a second after the drain had ended).
    private mutating func markDecrease(now: Int64) {
        if standingSince != nil { cutsWhileStanding += 1 }
        lastDecrease = now
        queueAtDecrease = delay.queueDelay
        judgeLossAfresh(now: now)
    }

    /// After any cut, loss is judged only on packets sent at the new rate, not on the queue the
    /// old rate left behind (a tail-drop queue goes on dropping while it drains).
    private mutating func judgeLossAfresh(now: Int64) {
        lossWindow.removeAll()
        lossFraction = 0
        lossCutSent = now
    }

    private mutating func updateLossBased(now: Int64) -> Cause? {
        if competing {
            // Sharing with a loss-based flow, loss is answered once a second, by the competing
            // rule, and this bound steps aside: it cut again for the same drops every 300 ms
            // (the call settled at a third of the link in one run of three), and one set by the
            // other sender's arrival (TCP's slow start overflowing the queue) held the rate the
            // competing state returned to at 250 kbit/s of 2 Mbit/s for 40 s.
            lossBound = max(lossBound, estimate)
            return nil
        }
        let elapsed = Double(min(now - (lastUpdate ?? now), 1_000_000)) / 1_000_000
        // Only loss beyond the path's own is the rate's doing.
        let excess = lossFraction - inherent
        if excess > 0.1 {
            if let last = lastLossChange, now - last < 300_000 { return nil }
            lossBound = max(configuration.minBitrate, Int(Double(min(estimate, lossBound)) * (1 - 0.5 * excess)))
            lastLossChange = now
            judgeLossAfresh(now: now)
            return lossBound < estimate ? .loss : nil
        }
        if excess < 0.02 {
            lossBound = min(configuration.maxBitrate, Int(Double(max(lossBound, estimate)) * (1 + 0.08 * elapsed)))
        }
        return nil
    }

    private var inherent: Double { min(inherentLoss, Self.inherentLossCeiling) }

    private func pow108(_ seconds: Double) -> Double {
        // 8 % per second, compounded over the elapsed time.
        var result = 1.0
        var remaining = seconds
        while remaining > 0 {
            let step = min(remaining, 0.1)
            result *= 1 + 0.08 * step
            remaining -= step
        }
        return result
    }
}
