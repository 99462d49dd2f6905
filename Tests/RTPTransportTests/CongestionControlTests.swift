import Testing
@testable import RTPTransport

/// A bottleneck link for estimator tests: FIFO, drains at `capacity`, drops what would wait
/// longer than `queueLimit`, plus a fixed propagation delay. Times in microseconds.
struct SimulatedLink {
    var capacity: Int
    var queueLimit: Int64 = 300_000
    var propagation: Int64 = 10_000
    var busyUntil: Int64 = 0
    var lossEvery: Int?  // drop every Nth packet regardless of the queue
    var count = 0
    /// A token bucket in front of the link (a policer, like tbf with a large burst): while it
    /// holds tokens and nothing waits, packets pass at line rate.
    var bucketBytes = 0
    var tokens = 0.0
    var lastSent: Int64 = 0
    /// Another sender that keeps the queue this long (µs) whatever ours does, as a TCP download
    /// keeps a buffer full; nil: none.
    var fillerQueue: Int64?
    /// A cellular link's scheduler: what has crossed is handed over only at multiples of this
    /// (µs); nil: at once.
    var grant: Int64?
    /// No delivery at all in this span (a fade): what is sent waits, up to the queue limit.
    var outage: Range<Int64>?

    /// Arrival time of a packet sent at `sent`, or nil when dropped.
    mutating func carry(sent: Int64, size: Int) -> Int64? {
        count += 1
        if let n = lossEvery, count % n == 0 { return nil }
        tokens = min(Double(bucketBytes), tokens + Double(sent - lastSent) * Double(capacity) / 8 / 1_000_000)
        lastSent = sent
        if busyUntil <= sent && tokens >= Double(size) {
            tokens -= Double(size)
            return sent + propagation
        }
        if let fill = fillerQueue { busyUntil = max(busyUntil, sent + fill) }
        var start = max(sent, busyUntil)
        if let outage, outage.contains(start) { start = outage.upperBound }
        guard start - sent <= queueLimit else { return nil }
        busyUntil = start + Int64(size * 8) * 1_000_000 / Int64(capacity)
        return (grant.map { (busyUntil + $0 - 1) / $0 * $0 } ?? busyUntil) + propagation
    }

    func queueDelay(at time: Int64) -> Int64 { max(0, busyUntil - time) }
}

/// Runs a sender whose rate follows the estimator through a link, with feedback every 50 ms.
struct EstimatorSimulation {
    var estimator = BandwidthEstimator()
    var link: SimulatedLink
    var now: Int64 = 0
    var sequence: UInt16 = 0
    var pending: [TransportFeedbackAdapter.Result] = []
    var changes: [BandwidthEstimator.Change] = []
    /// (time, estimate, queue delay) every 50 ms.
    var trace: [(time: Int64, estimate: Int, queue: Int64)] = []
    /// Probes sent: (time, estimate then, probe rate).
    var probes: [(time: Int64, estimate: Int, bitrate: Int)] = []

    init(capacity: Int, configuration: BandwidthEstimator.Configuration = .init()) {
        link = SimulatedLink(capacity: capacity)
        estimator = BandwidthEstimator(configuration: configuration)
    }

    mutating func send(size: Int, probe: BandwidthEstimator.ProbeCluster? = nil) {
        if let probe { estimator.probePacketSent(probe, sequence: sequence, size: size, at: now) }
        pending.append(.init(sequence: sequence, size: size, sent: now, arrived: link.carry(sent: now, size: size)))
        sequence &+= 1
    }

    /// Runs for `seconds`: 1200-byte packets at the estimate (paced), probes when asked.
    mutating func run(seconds: Double) {
        let end = now + Int64(seconds * 1_000_000)
        var nextFeedback = now + 50_000
        var credit = 0.0
        while now < end {
            if let probe = estimator.probeToSend(now: now) {
                probes.append((now, estimator.estimate, probe.bitrate))
                let packets = max(5, Int((Double(probe.bitrate) * Double(probe.duration) / 1e6 / 8 / 1200).rounded()))
                let spacing = probe.duration / Int64(packets)
                for _ in 0..<packets {
                    send(size: 1200, probe: probe)
                    now += spacing
                }
            }
            credit += Double(estimator.estimate) / 8 / 1000  // bytes per millisecond
            while credit >= 1200 {
                send(size: 1200)
                credit -= 1200
            }
            now += 1_000
            if now >= nextFeedback {
                // Feedback reports what has arrived by now, in order; a lost packet is reported
                // once a later one has arrived (as transport-cc does), or after 400 ms.
                let lastArrived = pending.lastIndex { ($0.arrived ?? .max) <= now }
                let ready = pending.enumerated().prefix { i, r in
                    r.arrived.map { $0 <= now } ?? (lastArrived.map { i < $0 } == true || r.sent + 400_000 <= now)
                }.map(\.element)
                pending.removeFirst(ready.count)
                if let change = estimator.onFeedback(Array(ready), now: now) { changes.append(change) }
                trace.append((now, estimator.estimate, link.queueDelay(at: now)))
                nextFeedback += 50_000
            }
        }
    }
}

@Suite struct DelayBasedDetectorTests {
    /// Frames of three packets every 33 ms; `growth` ms of extra queueing per frame from `from`.
    func trace(frames: Int, growth: Double, from: Int = 0) -> [(sent: Int64, arrived: Int64)] {
        var out: [(Int64, Int64)] = []
        var queue = 0.0
        for f in 0..<frames {
            if f >= from { queue += growth }
            for p in 0..<3 {
                let sent = Int64(f) * 33_000 + Int64(p) * 1_000
                out.append((sent, sent + 20_000 + Int64(queue * 1000) + Int64(p) * 1_000))
            }
        }
        return out
    }

    @Test func steadyDelayIsNormal() {
        var detector = DelayBasedDetector()
        for (sent, arrived) in trace(frames: 150, growth: 0) { detector.update(sent: sent, arrived: arrived, size: 1200) }
        #expect(detector.usage == .normal && abs(detector.trend) < 1)
    }

    @Test func risingQueueingDelayIsOveruseWithinAFewHundredMilliseconds() {
        var detector = DelayBasedDetector()
        var detectedAt: Int64?
        // 10 ms more queueing per 33 ms frame: sending 30 % above the bottleneck's capacity.
        for (sent, arrived) in trace(frames: 150, growth: 10, from: 60) {
            if detector.update(sent: sent, arrived: arrived, size: 1200) == .overusing && detectedAt == nil { detectedAt = sent }
        }
        let start = Int64(60) * 33_000
        let delay = try? #require(detectedAt).self - start
        #expect(delay != nil && delay! < 300_000, "overuse detected \(String(describing: delay)) µs after the queue began to grow")
    }

    @Test func aStandingQueueAboveTheLimitIsOveruse() {
        // The queue grows by 80 ms over ten frames, then stands still: the slope flattens, but
        // 80 ms above the base is more than the 50 ms the detector accepts.
        var detector = DelayBasedDetector()
        var usage: [DelayBasedDetector.Usage] = []
        for (sent, arrived) in trace(frames: 60, growth: 0) + trace(frames: 10, growth: 8).map({ ($0 + 60 * 33_000, $1 + 60 * 33_000) })
            + trace(frames: 60, growth: 0).map({ ($0 + 70 * 33_000, $1 + 70 * 33_000 + 80_000) }) {
            usage.append(detector.update(sent: sent, arrived: arrived, size: 1200))
        }
        #expect(abs(detector.queueDelay - 80) < 10, "queue delay \(detector.queueDelay) ms")
        #expect(usage.suffix(30).allSatisfy { $0 == .overusing })
        // 30 ms standing is within the limit.
        var calm = DelayBasedDetector()
        for (sent, arrived) in trace(frames: 60, growth: 0) + trace(frames: 60, growth: 0).map({ ($0 + 60 * 33_000, $1 + 60 * 33_000 + 30_000) }) {
            calm.update(sent: sent, arrived: arrived, size: 1200)
        }
        #expect(calm.usage == .normal)
    }

    @Test func drainingQueueIsUnderuse() {
        var detector = DelayBasedDetector()
        var sawUnderuse = false
        for (sent, arrived) in trace(frames: 120, growth: -1.5, from: 60) {
            if detector.update(sent: sent, arrived: arrived, size: 1200) == .underusing { sawUnderuse = true }
        }
        #expect(sawUnderuse)
    }
}

@Suite struct BandwidthEstimatorTests {
    @Test func steadyRoomMakesTheEstimateClimbFastThroughProbes() {
        var sim = EstimatorSimulation(capacity: 2_500_000)
        sim.run(seconds: 5)
        #expect(sim.estimator.estimate >= 2_000_000, "after 5 s: \(sim.estimator.estimate) \(sim.changes.filter { $0.cause != .increase })")
        // Then it stays high: mean of the next 10 s at least 90 % of capacity.
        let from = sim.now
        sim.run(seconds: 10)
        let later = sim.trace.filter { $0.time > from }
        #expect(later.reduce(0) { $0 + $1.estimate } / later.count >= 2_250_000, "mean \(later.reduce(0) { $0 + $1.estimate } / later.count)")
        #expect(sim.changes.contains { $0.cause == .probe })
        let queues = sim.trace.map(\.queue).sorted()
        #expect(queues[queues.count * 95 / 100] < 100_000, "p95 queue \(queues[queues.count * 95 / 100]) µs")
    }

    @Test func aCapacityDropCutsTheEstimateBelowItWithinHalfASecond() {
        var sim = EstimatorSimulation(capacity: 2_500_000)
        sim.run(seconds: 8)
        #expect(sim.estimator.estimate > 1_800_000)
        let dropAt = sim.now
        sim.link.capacity = 600_000
        sim.run(seconds: 5)
        let below = sim.trace.first { $0.time > dropAt && $0.estimate < 600_000 }
        #expect(below != nil && below!.time - dropAt <= 500_000, "below capacity after \(String(describing: below.map { $0.time - dropAt })) µs")
        #expect(sim.changes.contains { $0.cause == .delay && $0.time > dropAt })
        // Afterwards it stays near capacity without a standing queue.
        let late = sim.trace.filter { $0.time > dropAt + 2_000_000 }
        let mean = late.reduce(0) { $0 + $1.estimate } / late.count
        #expect(mean > 400_000 && mean < 700_000, "mean estimate \(mean)")
        let queues = late.map(\.queue).sorted()
        #expect(queues[queues.count * 95 / 100] < 150_000, "p95 queue \(queues[queues.count * 95 / 100]) µs")
    }

    /// After the drop from 2.5 to 0.6 Mbit/s the deep cut that drains the queue is undone once
    /// it has drained, with a short path and with a 50 ms one. Each packet now takes 12 ms longer
    /// to cross the link, so the delay never returns to its old minimum: waiting for that (and
    /// for the trend) held the estimate at a third of the link for 2-3 s. The drops of the
    /// overflowing queue do not cut it a second time.
    @Test(arguments: [10_000, 50_000] as [Int64])
    func theDrainCutIsUndoneOnceTheQueueHasDrained(propagation: Int64) {
        var sim = EstimatorSimulation(capacity: 2_500_000)
        sim.link.propagation = propagation
        sim.run(seconds: 8)
        let dropAt = sim.now
        sim.link.capacity = 600_000
        sim.run(seconds: 4)
        let back = sim.trace.first { $0.time > dropAt + 300_000 && $0.estimate >= 450_000 }
        #expect(back != nil && back!.time - dropAt <= 1_200_000, "back to 450 kbit/s after \(String(describing: back.map { $0.time - dropAt })) µs")
        let after = sim.trace.filter { $0.time > dropAt + 1_500_000 }
        #expect(after.map(\.queue).max()! < 100_000, "no new queue from the return")
        // The drops of the overflowing queue are what the delay cuts answer: no second cut for them.
        #expect(!sim.changes.contains { $0.cause == .loss && $0.time > dropAt }, "\(sim.changes.filter { $0.time > dropAt && $0.cause != .increase })")
    }

    /// From a known low capacity (where probes find no room and back off), a rise to 2.5 Mbit/s
    /// must still be found: 90 % within 5 s.
    @Test(arguments: [(600_000, 6.0), (1_000_000, 10.0)])
    func aRiseInCapacityIsFoundWithinSeconds(from capacity: Int, after seconds: Double) {
        var sim = EstimatorSimulation(capacity: capacity)
        sim.run(seconds: seconds)
        let riseAt = sim.now
        sim.link.capacity = 2_500_000
        sim.run(seconds: 8)
        let reached = sim.trace.first { $0.time > riseAt && $0.estimate >= 2_250_000 }
        #expect(reached != nil && reached!.time - riseAt <= 5_000_000, "90 % after \(String(describing: reached.map { $0.time - riseAt })) µs \(sim.probes.filter { $0.time > riseAt - 3_000_000 }) \(sim.changes.filter { $0.cause != .increase && $0.time > riseAt - 3_000_000 })")
    }

    /// The climb after a rise from a full link (RFC 8867's 1.0 -> 2.5 and 0.6 -> 1.0 Mbit/s),
    /// with the rise at eight points of the probe cycle: 85 % of the new capacity within 1.3 s
    /// on average (1.45-1.5 s with three gentle steps and half a second after the first), and
    /// the climb ends at least 93 % up (90 % when a measured capacity was taken at 0.9).
    @Test(arguments: [(1_000_000, 2_500_000), (600_000, 1_000_000)])
    func theClimbAfterARiseTakesAboutASecond(from: Int, to: Int) {
        var times: [Int64] = []
        var tops: [Int] = []
        for shift in 0..<8 {
            var sim = EstimatorSimulation(capacity: from)
            sim.run(seconds: 10 + Double(shift) * 0.13)
            let riseAt = sim.now
            sim.link.capacity = to
            sim.run(seconds: 4)
            let reached = sim.trace.first { $0.time > riseAt && $0.estimate >= to * 85 / 100 }
            times.append(reached.map { $0.time - riseAt } ?? 4_000_000)
            tops.append(sim.changes.filter { $0.time > riseAt && $0.time < riseAt + 3_000_000 && $0.cause == .probe }.map(\.to).max() ?? 0)
        }
        let mean = times.reduce(0, +) / Int64(times.count)
        #expect(mean <= 1_300_000, "85 % after \(times) µs")
        #expect(tops.allSatisfy { $0 >= to * 93 / 100 }, "highest probe results \(tops)")
    }

    /// A gentle probe carried only a little past the known capacity (a token bucket passes a
    /// probe just above the link whole, so it may say nothing) is followed by the same small
    /// step half a second later, not by a 1.5x one at once (at 600 kbit/s that queued up 100 ms
    /// every two seconds). One carried well past it (by 15 % or more) steps to 1.5x at once.
    /// (Third case: media at 800 kbit/s lets the estimate creep to 1.09 Mbit/s, 9 % past the
    /// capacity found; the 1.36 Mbit/s probe arrives at 1.27, 27 % past it but slowed by the
    /// link: it measured the link, so the step stays small.)
    @Test(arguments: [(750, 1_100_000, 1.25, 500_000), (750, nil, 1.5, 0), (1000, 1_267_000, 1.25, 500_000)] as [(Int, Int?, Double, Int64)])
    func aGentleProbeJustPastTheCapacityStepsSmall(mediaPacket: Int, arrivalRate: Int?, nextMultiple: Double, wait: Int64) throws {
        var configuration = BandwidthEstimator.Configuration()
        configuration.initialProbes = []
        configuration.startBitrate = 800_000
        var estimator = BandwidthEstimator(configuration: configuration)
        var sequence: UInt16 = 0
        var now: Int64 = 0
        var pending: [TransportFeedbackAdapter.Result] = []
        func calm(until end: Int64) {
            // Media at 600 kbit/s (750-byte packets: the estimate stays where the probe put it,
            // as it grows to at most 1.5x what arrives) or 800, every 10 ms, 20 ms one way.
            while now < end {
                pending.append(.init(sequence: sequence, size: mediaPacket, sent: now, arrived: now + 20_000))
                sequence &+= 1
                now += 10_000
                if now % 50_000 == 0 { estimator.onFeedback(pending, now: now); pending = [] }
            }
        }
        /// Sends `probe` as 20 packets arriving at `rate` (nil: as sent), reported at the next
        /// 50 ms after it.
        func send(_ probe: BandwidthEstimator.ProbeCluster, arrivingAt rate: Int?) {
            var results: [TransportFeedbackAdapter.Result] = []
            let size = Int(Double(probe.bitrate) * Double(probe.duration) / 8_000_000 / 20)
            var arrival: Int64 = 0
            for i in 0..<20 {
                let sent = now + Int64(i) * probe.duration / 20
                estimator.probePacketSent(probe, sequence: sequence, size: size, at: sent)
                arrival = max(sent + 20_000, rate.map { arrival + Int64(size * 8) * 1_000_000 / Int64($0) } ?? 0)
                results.append(.init(sequence: sequence, size: size, sent: sent, arrived: arrival))
                sequence &+= 1
            }
            now = (arrival / 50_000 + 1) * 50_000
            estimator.onFeedback(results, now: now)
        }
        calm(until: 1_000_000)
        // The first probe (2x: no capacity known) finds a 1 Mbit/s link; the estimate is 0.95 of it.
        let due = estimator.probeToSend(now: now)
        send(try #require(due), arrivingAt: 1_000_000)
        // The next is gentle (1.25x the estimate: 1.19 Mbit/s) and carried, a little past the
        // capacity found (1.1 Mbit/s arrive) or well past it (all of it).
        var gentle: BandwidthEstimator.ProbeCluster?
        while gentle == nil && now < 5_000_000 { calm(until: now + 50_000); gentle = estimator.probeToSend(now: now) }
        let probe = try #require(gentle)
        #expect(abs(Double(probe.bitrate) / Double(estimator.estimate) - 1.25) < 0.01)
        send(probe, arrivingAt: arrivalRate)
        let judged = now
        var next: BandwidthEstimator.ProbeCluster?
        while next == nil && now < judged + 2_000_000 {
            next = estimator.probeToSend(now: now)
            if next == nil { calm(until: now + 10_000) }
        }
        let following = try #require(next)
        #expect(abs(Double(following.bitrate) / Double(estimator.estimate) - nextMultiple) < 0.01, "\(following.bitrate) at \(estimator.estimate)")
        // (The probe's own queue delays the next one until the detector is back to normal.)
        #expect(now - judged >= wait && now - judged <= wait + 400_000, "after \(now - judged) µs")
    }

    @Test func aProbeThroughATokenBucketIsUndoneQuickly() {
        // A 15 kB bucket on a 600 kbit/s link lets a whole probe through at line rate: the probe
        // looks like spare room. The queue that follows undoes it within a second.
        var sim = EstimatorSimulation(capacity: 600_000)
        sim.link.bucketBytes = 15_000
        sim.run(seconds: 20)
        let late = sim.trace.filter { $0.time > 3_000_000 }
        var longest: Int64 = 0, since: Int64?
        for point in late {
            if point.estimate > 720_000 { since = since ?? point.time; longest = max(longest, point.time - since!) } else { since = nil }
        }
        #expect(longest <= 1_000_000, "estimate above 1.2 x capacity for \(longest) µs")
        let mean = late.map(\.estimate).reduce(0, +) / late.count
        #expect(mean > 400_000 && mean < 700_000, "mean estimate \(mean)")
    }

    /// At a full link the estimate sits near the capacity the path has shown: probes there go
    /// only a little above it, so they leave no queue worth the name.
    @Test func probesNearTheKnownCapacityAreGentle() {
        var sim = EstimatorSimulation(capacity: 1_000_000)
        sim.run(seconds: 30)
        let late = sim.probes.filter { $0.time > 10_000_000 }
        #expect(!late.isEmpty, "it still probes")
        #expect(late.allSatisfy { Double($0.bitrate) <= 1.6 * Double($0.estimate) }, "\(late)")
        let queues = sim.trace.filter { $0.time > 10_000_000 }.map(\.queue).sorted()
        #expect(queues[queues.count * 95 / 100] <= 30_000, "p95 queue \(queues[queues.count * 95 / 100]) µs")
    }

    /// A probe in flight when the capacity drops is reported after the cut that drop caused;
    /// it measured the old path and must not raise the estimate back up.
    @Test func aProbeSentBeforeACutRaisesNothing() throws {
        var configuration = BandwidthEstimator.Configuration()
        configuration.initialProbes = []
        configuration.startBitrate = 1_000_000
        var estimator = BandwidthEstimator(configuration: configuration)
        var sequence: UInt16 = 0
        var pending: [TransportFeedbackAdapter.Result] = []
        var now: Int64 = 0
        // Two calm seconds: a 1200-byte packet every 10 ms, 20 ms one way.
        while now < 2_000_000 {
            pending.append(.init(sequence: sequence, size: 1200, sent: now, arrived: now + 20_000))
            sequence &+= 1
            now += 10_000
            if now % 50_000 == 0 { estimator.onFeedback(pending, now: now); pending = [] }
        }
        // A probe goes out (its reports held back, as if they were still in flight)...
        let due = estimator.probeToSend(now: now)
        let probe = try #require(due)
        var probePackets: [TransportFeedbackAdapter.Result] = []
        for i in 0..<20 {
            let sent = now + Int64(i) * probe.duration / 20
            estimator.probePacketSent(probe, sequence: sequence, size: 1200, at: sent)
            probePackets.append(.init(sequence: sequence, size: 1200, sent: sent, arrived: sent + 20_000))
            sequence &+= 1
        }
        now += probe.duration
        // ...then the queue grows 4 ms per packet until the estimate is cut.
        var queue: Int64 = 0
        while estimator.lastDecrease == nil && now < 4_000_000 {
            queue += 4_000
            pending.append(.init(sequence: sequence, size: 1200, sent: now, arrived: now + 20_000 + queue))
            sequence &+= 1
            now += 10_000
            if now % 50_000 == 0 { estimator.onFeedback(pending, now: now); pending = [] }
        }
        let cut = estimator.estimate
        #expect(estimator.lastDecrease != nil && cut < 1_000_000, "the growing queue cuts the estimate")
        // The probe's reports arrive now: it was carried whole at its rate, before the cut.
        estimator.onFeedback(probePackets, now: now + 10_000)
        #expect(estimator.estimate <= cut, "\(cut) -> \(estimator.estimate)")
    }

    /// The creep past a link just above the start rate (no probes) ends in a short, slowly
    /// growing queue: the cut takes back the overshoot and drains that queue, no more (not 8 %
    /// below what arrives: 0.88 of the estimate here, and the bench's 2.5 Mbit/s phase behind a
    /// 50 ms path was 0.87-0.90 used). A link far below the rate is still cut below what it
    /// carries.
    @Test func aSmallOvershootTakesBackOnlyTheOvershoot() throws {
        var configuration = BandwidthEstimator.Configuration()
        configuration.initialProbes = []
        configuration.startBitrate = 1_000_000
        configuration.probeInterval = 100_000_000
        func firstCut(capacity: Int, after: Int64) throws -> BandwidthEstimator.Change {
            var sim = EstimatorSimulation(capacity: capacity, configuration: configuration)
            sim.link.propagation = 20_000
            sim.run(seconds: 5)
            return try #require(sim.changes.first { $0.cause == .delay && $0.time > after })
        }
        // (The first second holds a cut from the start, before the creep has passed the link.)
        let creep = try firstCut(capacity: 1_050_000, after: 1_000_000)
        #expect(creep.from > 1_050_000 && Double(creep.to) >= 0.93 * Double(creep.from) && creep.to < 1_050_000, "\(creep)")
        let drop = try firstCut(capacity: 600_000, after: 0)
        #expect(drop.to < 600_000, "\(drop)")
    }

    /// A queue that neither grows nor shrinks after a cut is standing: the cut left the rate at
    /// the capacity (an undone probe returns to the rate before it, which may be just that). It
    /// is cut again after 300 ms instead of being left for a second, and an undone probe returns
    /// a little below where it was, enough to drain its queue within a second. Here probes
    /// through a 4 kB token bucket on a 1 Mbit/s link are undone now and then: no queue above
    /// 30 ms lasts longer than 500 ms (790 ms with the undo going back exactly, 1.0 s without
    /// the re-cut either).
    @Test func aQueueThatStandsAfterACutIsCutAgain() {
        var sim = EstimatorSimulation(capacity: 1_000_000)
        sim.link.bucketBytes = 4_000
        sim.run(seconds: 60)
        var longest: Int64 = 0, since: Int64?
        for point in sim.trace where point.time > 5_000_000 {
            if point.queue > 30_000 { since = since ?? point.time; longest = max(longest, point.time - since!) } else { since = nil }
        }
        #expect(longest <= 500_000, "a queue above 30 ms for \(longest) µs")
    }

    @Test func aProbeIsJudgedOnItsLaterPackets() {
        // A 4 kB bucket passes the first few packets of a probe at line rate; the rest queue.
        // Judged on the later half, the probe reports the link, not the bucket. (All probes at
        // twice the estimate here: a gentle one the bucket absorbs whole is the overuse's to undo.)
        var sim = EstimatorSimulation(capacity: 1_000_000, configuration: { var c = BandwidthEstimator.Configuration(); c.gentleProbeMultiples = []; return c }())
        sim.link.bucketBytes = 4_000
        sim.run(seconds: 12)
        let probes = sim.changes.filter { $0.cause == .probe && $0.time > 3_000_000 }
        #expect(probes.allSatisfy { $0.to <= 1_100_000 }, "\(probes)")
        #expect(sim.trace.filter { $0.time > 3_000_000 }.allSatisfy { $0.estimate <= 1_200_000 })
    }

    /// RFC 8867 §5.6: a buffer another sender keeps full. Cutting for its queue drains nothing;
    /// after a few such cuts the estimator stops answering delay, takes back half of what it cut,
    /// and holds its share by loss; once the other sender has gone, delay rules again and the
    /// rate returns. (This filler yields everything, so the sender has grown past the link and
    /// fills the queue itself when the filler goes: the next drain test, within 10 s, finds it.)
    @Test func aQueueAnotherSenderKeepsFullIsSharedNotFled() {
        var sim = EstimatorSimulation(capacity: 2_000_000)
        sim.run(seconds: 10)
        let alone = sim.estimator.estimate
        #expect(!sim.estimator.competing)
        sim.link.fillerQueue = 250_000
        let start = sim.now
        var entered: Int64?
        for _ in 0..<200 {
            sim.run(seconds: 0.1)
            if entered == nil, sim.estimator.competing { entered = sim.now - start }
        }
        #expect(entered != nil && entered! < 3_000_000, "competing after \(entered.map { Double($0) / 1e6 } ?? -1) s")
        #expect(!sim.estimator.competing || sim.estimator.pathQueueDelay == .infinity, "the other sender's queue counts as one (no repair lane)")
        // It returns to half of its rate from before the episode, whatever the cuts left.
        let returned = sim.changes.first { $0.time > start && $0.cause == .competing }?.to ?? 0
        #expect(returned >= alone * 45 / 100, "returned to \(returned) of \(alone): \(sim.changes.filter { $0.time > start - 3_000_000 && $0.cause != .increase })")
        let lowest = sim.trace.filter { $0.time > start + 5_000_000 }.map(\.estimate).min() ?? 0
        #expect(lowest >= alone * 2 / 5, "held \(lowest) of \(alone) while the other sender filled the queue")
        sim.link.fillerQueue = nil
        let gone = sim.now
        var left: Int64?
        for _ in 0..<150 {
            sim.run(seconds: 0.1)
            if left == nil, !sim.estimator.competing { left = sim.now - gone }
        }
        #expect(left != nil && left! <= 11_000_000, "delay in charge again after \(left.map { Double($0) / 1e6 } ?? -1) s")
        #expect(sim.estimator.estimate >= alone * 9 / 10, "\(sim.estimator.estimate) of \(alone)")
        #expect(sim.estimator.changes.contains { $0.cause == .competing })
    }

    /// A download that arrives fast takes most of the link at once: what arrives falls, and the
    /// first cut is deep, before the queue stands at 80 ms (here a short buffer holds it under);
    /// then the download keeps the queue full. The competing state returns to half of the rate
    /// from before that first cut, though the creep's small cuts came every 1.2 s before it.
    @Test func competingReturnsToHalfTheRateFromBeforeAFastEpisode() {
        var sim = EstimatorSimulation(capacity: 2_000_000)
        for _ in 0..<8 {  // the creep's small cuts, 1.2 s apart
            sim.link.capacity = 1_700_000
            sim.run(seconds: 0.4)
            sim.link.capacity = 2_000_000
            sim.run(seconds: 0.8)
        }
        let alone = sim.estimator.estimate, start = sim.now
        sim.link.capacity = 500_000
        sim.link.queueLimit = 60_000
        sim.run(seconds: 0.5)
        sim.link.queueLimit = 300_000
        sim.link.fillerQueue = 250_000
        for _ in 0..<60 where !sim.estimator.competing { sim.run(seconds: 0.1) }
        let returned = sim.changes.first { $0.time > start && $0.cause == .competing }?.to ?? 0
        #expect(returned >= alone * 45 / 100, "returned to \(returned) of \(alone): \(sim.changes.filter { $0.time > start - 2_000_000 && $0.cause != .increase })")
    }

    /// While sharing with a loss-based flow, a burst of heavy loss (the other sender's queue
    /// overflowing) is answered once a second, by the competing rule alone: not also by the
    /// loss bound every 300 ms as well, which took a third off in two seconds of 25 % loss.
    @Test func whileCompetingABurstOfLossIsAnsweredOnceASecond() {
        var sim = EstimatorSimulation(capacity: 2_000_000)
        sim.run(seconds: 10)
        sim.link.fillerQueue = 250_000
        for _ in 0..<60 where !sim.estimator.competing { sim.run(seconds: 0.1) }
        #expect(sim.estimator.competing)
        sim.run(seconds: 1)
        let before = sim.estimator.estimate, burst = sim.now
        sim.link.lossEvery = 4
        sim.run(seconds: 2)
        let cuts = sim.changes.filter { $0.time > burst && $0.cause == .loss }
        #expect(cuts.count <= 2, "\(cuts)")
        #expect(sim.estimator.estimate >= before * 7 / 10, "\(before) -> \(sim.estimator.estimate) after 2 s of 25 % loss: \(cuts)")
    }

    /// Capacity that falls and rises (RFC 8867 §5.1's schedule) is this sender's own queue: the
    /// cuts drain it, and the estimator never takes it for another sender's.
    @Test func aCapacityScheduleAloneIsNeverTakenForCompetition() {
        var sim = EstimatorSimulation(capacity: 1_000_000)
        for (capacity, seconds) in [(1_000_000, 20.0), (2_500_000, 10.0), (600_000, 10.0), (1_000_000, 10.0)] {
            sim.link.capacity = capacity
            for _ in 0..<Int(seconds * 10) {
                sim.run(seconds: 0.1)
                #expect(!sim.estimator.competing, "at \(Double(sim.now) / 1e6) s, \(capacity) bit/s")
            }
        }
    }

    /// A link that hands packets over every 60 ms is known as bursty within seconds, and the
    /// holds are not read as congestion: no delay cut, the estimate only climbs. A wired
    /// bottleneck, even one that drops from 2.5 to 0.6 Mbit/s under a full queue, never is.
    @Test func aLinkThatDeliversInBurstsIsKnownAsBurstyAndAWiredOneNever() {
        var cellular = EstimatorSimulation(capacity: 2_000_000)
        cellular.link.grant = 60_000
        cellular.run(seconds: 5)
        #expect(cellular.estimator.burstyLink)
        let from = cellular.now
        let reached = cellular.estimator.estimate
        cellular.run(seconds: 10)
        let later = cellular.trace.filter { $0.time > from }
        #expect(later.map(\.estimate).min()! >= reached, "lowest \(later.map(\.estimate).min()!) from \(reached)")
        #expect(!cellular.changes.contains { $0.cause == .delay }, "\(cellular.changes.filter { $0.cause == .delay })")
        var wired = EstimatorSimulation(capacity: 2_500_000)
        var bursty = false
        for step in 0..<26 {
            if step == 16 { wired.link.capacity = 600_000 }
            wired.run(seconds: 0.5)
            bursty = bursty || wired.estimator.burstyLink
        }
        #expect(!bursty)
    }

    /// A 2 s fade on a bursty link (nothing delivered; what was sent in its last 300 ms queued,
    /// the rest lost): the hold is not cut for as congestion, and once the link delivers again
    /// the rate is back to 60 % of what it was within 3 s (before, the delay cuts of the fade
    /// took it to the floor and it climbed back by 8 % a second).
    /// A 2 s fade on a bursty link, to 5 % or 15 % of its 2 Mbit/s: the estimate follows the
    /// rate the link still delivers (measured over a second, not over a hold) and is not cut
    /// below three quarters of it (before, the delay cuts took it to 50k and 108k: the floor
    /// and a third of what was offered); and after the fade, or a 2 s outage, the rate is back
    /// to 60 % of what it was within 6 s.
    @Test(arguments: [0, 100_000, 300_000])
    func aFadeOnABurstyLinkIsFollowedNotFled(fadeCapacity: Int) {
        var sim = EstimatorSimulation(capacity: 2_000_000)
        sim.link.grant = 50_000
        sim.run(seconds: 12)
        let before = sim.estimator.estimate
        #expect(sim.estimator.burstyLink && before >= 1_400_000, "\(before)")
        let start = sim.now
        if fadeCapacity == 0 { sim.link.outage = start..<(start + 2_000_000) } else { sim.link.capacity = fadeCapacity }
        sim.run(seconds: 2)
        sim.link.capacity = 2_000_000
        let end = sim.now
        sim.run(seconds: 6)
        let lowest = sim.trace.filter { $0.time > start }.map(\.estimate).min()!
        if fadeCapacity > 0 { #expect(Double(lowest) >= 0.75 * Double(fadeCapacity), "lowest \(lowest)") }
        let back = sim.trace.first { $0.time > end && Double($0.estimate) >= 0.6 * Double(before) }
        #expect(back != nil, "lowest after the fade \(sim.trace.filter { $0.time > end }.map(\.estimate).min()!)")
    }

    @Test func heavyLossCutsTheEstimate() {
        var sim = EstimatorSimulation(capacity: 10_000_000)
        sim.run(seconds: 4)
        let before = sim.estimator.estimate
        sim.link.lossEvery = 5  // 20 % loss with no queue at all
        sim.run(seconds: 2)
        #expect(sim.estimator.estimate < before * 8 / 10, "\(before) -> \(sim.estimator.estimate)")
        #expect(sim.changes.contains { $0.cause == .loss })
    }

    /// Loss the path has by itself (12.5 %, with no queue: a radio link) is learned as the
    /// path's own within seconds and then cuts nothing: the rate stays where the capacity is,
    /// where the old rule (any loss above 10 %) cut every 0.3 s down to the minimum.
    @Test func steadyLossWithoutAQueueIsNotCongestion() {
        var sim = EstimatorSimulation(capacity: 3_000_000)
        sim.run(seconds: 8)
        let before = sim.estimator.estimate
        sim.link.lossEvery = 8
        sim.run(seconds: 10)
        let settled = sim.now
        sim.run(seconds: 20)
        let late = sim.changes.filter { $0.time > settled && $0.cause == .loss }
        #expect(late.isEmpty, "loss cuts after the loss was learned: \(late)")
        #expect(sim.estimator.inherentLoss > 0.1 && sim.estimator.inherentLoss < 0.15, "\(sim.estimator.inherentLoss)")
        #expect(sim.estimator.estimate >= before * 8 / 10, "\(before) -> \(sim.estimator.estimate)")
        // A queue that overflows on top of it is still congestion: the capacity halves.
        sim.link.capacity = 1_000_000
        sim.run(seconds: 5)
        #expect(sim.estimator.estimate < 1_000_000, "\(sim.estimator.estimate)")
    }

    @Test func lightLossDoesNotCutIt() {
        var sim = EstimatorSimulation(capacity: 10_000_000)
        sim.link.lossEvery = 100  // 1 %
        sim.run(seconds: 6)
        #expect(!sim.changes.contains { $0.cause == .loss })
        #expect(sim.estimator.estimate > 1_500_000)
    }
}

@Suite struct PacerTests {
    /// A shut congestion window while video keeps coming, and a flood of retransmissions: the
    /// queue stops at its bound, the oldest of the lowest priority go first, audio stays.
    @Test func theQueueStopsAtItsBound() {
        var pacer = Pacer<Int>(pacingRate: 1_000_000)
        pacer.maxPackets = 100
        pacer.holdVideo = true
        for n in 0..<10 { pacer.enqueue(-n, size: 100, priority: .audio, now: 0) }
        for n in 0..<40 { pacer.enqueue(1000 + n, size: 1200, priority: .retransmission, now: 0) }
        for n in 0..<5000 { pacer.enqueue(n, size: 1200, priority: .video, now: Int64(n)) }
        #expect(pacer.count == 100)
        #expect(pacer.droppedPackets == 4950)
        #expect(pacer.queuedBytes == 10 * 100 + 90 * 1200)
        // A retransmission flood past the bound pushes out video first, then older retransmissions.
        for n in 0..<200 { pacer.enqueue(2000 + n, size: 1200, priority: .retransmission, now: 10_000) }
        #expect(pacer.count == 100 && pacer.queuedBytes == 10 * 100 + 90 * 1200)
        pacer.holdVideo = false
        var out: [Int] = []
        var now: Int64 = 20_000
        while let entry = pacer.next(now: now) ?? { now += 100_000; return pacer.next(now: now) }() { out.append(entry.item) }
        #expect(out.prefix(10) == [0, -1, -2, -3, -4, -5, -6, -7, -8, -9], "audio kept, in order")
        #expect(Array(out.dropFirst(10)) == Array(2110..<2200), "the newest retransmissions")
    }

    @Test func aFrameIsSpreadAtThePacingRate() {
        var pacer = Pacer<Int>(pacingRate: 1_000_000)
        for i in 0..<10 { pacer.enqueue(i, size: 1250, priority: .video, now: 0) }
        var sentAt: [Int64] = []
        var now: Int64 = 0
        while sentAt.count < 10 && now < 1_000_000 {
            while pacer.next(now: now) != nil { sentAt.append(now) }
            now += 1_000
        }
        // 1250 bytes at 1 Mbit/s take 10 ms: after a small burst allowance, one every 10 ms.
        #expect(sentAt.count == 10)
        let gaps = zip(sentAt.dropFirst(3), sentAt.dropFirst(2)).map { $0 - $1 }
        #expect(gaps.allSatisfy { (9_000...11_000).contains($0) }, "\(sentAt)")
    }

    @Test func audioAndRetransmissionsGoFirst() {
        var pacer = Pacer<String>(pacingRate: 100_000)
        pacer.enqueue("video", size: 1000, priority: .video, now: 0)
        pacer.enqueue("rtx", size: 1000, priority: .retransmission, now: 0)
        pacer.enqueue("audio", size: 100, priority: .audio, now: 0)
        pacer.enqueue("fec", size: 1000, priority: .protection, now: 0)
        #expect(pacer.next(now: 0)?.item == "audio")
        #expect(pacer.next(now: 0)?.item == "rtx")
        #expect(pacer.next(now: 10_000_000)?.item == "fec", "FEC after repairs, before video")
    }

    /// 1 Mbit/s of media pacing; repairs at 1 Mbit/s more in their own bucket leave beside
    /// media instead of waiting behind it, and take nothing from its budget.
    @Test func repairsHaveABucketOfTheirOwn() {
        func sent(repairRate: Int) -> (media: Int, repairs: Int) {
            var pacer = Pacer<String>(pacingRate: 1_000_000)
            pacer.repairRate = repairRate
            var counts = (media: 0, repairs: 0)
            for ms in 0..<100 {
                let now = Int64(ms) * 1_000
                // 2 Mbit/s of media and 1 of repairs offered: 250 + 125 bytes a millisecond.
                if ms % 4 == 0 { pacer.enqueue("video", size: 1_000, priority: .video, now: now) }
                if ms % 8 == 0 { pacer.enqueue("rtx", size: 1_000, priority: .retransmission, now: now) }
                while let entry = pacer.next(now: now) { entry.item == "rtx" ? (counts.repairs += 1) : (counts.media += 1) }
            }
            return counts
        }
        let shared = sent(repairRate: 0), own = sent(repairRate: 1_000_000)
        #expect(own.repairs == 13 && shared.repairs == 13, "every repair offered leaves: \(own) \(shared)")
        #expect(own.media >= 12 + shared.media - 1, "media keeps its rate beside them: \(own) vs \(shared)")
    }

    @Test func aLongQueueRaisesTheRateToEmptyIt() {
        var pacer = Pacer<Int>(pacingRate: 100_000)
        for i in 0..<100 { pacer.enqueue(i, size: 1200, priority: .video, now: 0) }
        #expect(pacer.effectiveRate(now: 200_000) > 100_000)
        var now: Int64 = 0, sent = 0
        while sent < 100 && now < 2_000_000 {
            while pacer.next(now: now) != nil { sent += 1 }
            now += 1_000
        }
        #expect(now <= 400_000, "queue emptied after \(now) µs")
    }

    @Test func theQueueEmptyingRiseStopsAtTheDrainCap() {
        var pacer = Pacer<Int>(pacingRate: 100_000)
        pacer.maxDrainRate = 150_000
        for i in 0..<100 { pacer.enqueue(i, size: 1200, priority: .video, now: 0) }
        #expect(pacer.effectiveRate(now: 200_000) == 150_000)
        pacer.maxDrainRate = .max
        #expect(pacer.effectiveRate(now: 200_000) > 1_000_000)
    }

    @Test func aProbeAsksForPaddingAtItsRate() {
        var pacer = Pacer<Int>(pacingRate: 500_000)
        pacer.startProbe(.init(id: 1, bitrate: 2_000_000, duration: 50_000), now: 0)
        var padding: [Int] = []
        var now: Int64 = 0
        while now <= 60_000 {
            while let bytes = pacer.paddingWanted(now: now) { pacer.paddingSent(size: bytes); padding.append(bytes) }
            now += 1_000
        }
        // 2 Mbit/s for 50 ms is 12,500 bytes (plus the burst allowance and at most a packet), in
        // packets the size of media's.
        let total = padding.reduce(0, +)
        #expect(total > 10_000 && total < 17_500, "\(total) bytes of padding")
        #expect(padding.allSatisfy { $0 >= 1_000 }, "\(padding)")
        #expect(!pacer.probing)
    }

    /// The congestion window: while held, only audio leaves; video waits in order.
    @Test func heldVideoWaitsAndAudioDoesNot() {
        var pacer = Pacer<Int>(pacingRate: 1_000_000)
        pacer.enqueue(1, size: 1_200, priority: .video, now: 0)
        pacer.enqueue(2, size: 1_200, priority: .retransmission, now: 0)
        pacer.enqueue(3, size: 200, priority: .audio, now: 0)
        pacer.holdVideo = true
        #expect(pacer.next(now: 10_000)?.item == 3)
        #expect(pacer.next(now: 20_000) == nil)
        pacer.holdVideo = false
        #expect(pacer.next(now: 30_000)?.item == 2)
        #expect(pacer.next(now: 40_000)?.item == 1)
    }

    /// A gentle probe (1.25x the estimate) is below the pacing rate (1.5x): media and padding
    /// together go at the probe's rate, not the pacing rate.
    @Test func aProbeBelowThePacingRateKeepsToItsOwnRate() {
        var pacer = Pacer<Int>(pacingRate: 1_500_000)
        pacer.startProbe(.init(id: 1, bitrate: 1_250_000, duration: 100_000), now: 0)
        var sent = 0
        var now: Int64 = 0
        while now < 100_000 {
            if now % 33_000 == 0 { for i in 0..<4 { pacer.enqueue(i, size: 1_200, priority: .video, now: now) } }
            while let entry = pacer.next(now: now) { sent += entry.size }
            while let bytes = pacer.paddingWanted(now: now) { pacer.paddingSent(size: bytes); sent += bytes }
            now += 1_000
        }
        // 1.25 Mbit/s for 100 ms is 15,625 bytes, plus the burst allowance and one packet (at
        // the pacing rate it was 22,000).
        #expect(sent < 20_000, "\(sent) bytes in the probe's 100 ms")
        #expect(sent > 13_000, "\(sent) bytes in the probe's 100 ms")
    }
}
