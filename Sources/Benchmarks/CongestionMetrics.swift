import CallEndpoint
import Foundation

/// One reading of the bottleneck, every 100 ms: what the sender put on the wire toward the
/// router, what the router's tbf passed on, dropped and held. Counters are cumulative.
public struct BottleneckSample: Sendable, Equatable {
    /// Seconds since the schedule started.
    public var time: Double
    /// The tbf rate in force, bit/s.
    public var capacity: Int
    /// Bytes the sender's link carried into the router.
    public var sentBytes: UInt64
    /// Bytes and packets the tbf sent on toward the receiver.
    public var deliveredBytes: UInt64
    public var deliveredPackets: UInt64
    /// Packets the tbf dropped (its queue was full).
    public var drops: UInt64
    /// Bytes waiting in the tbf queue.
    public var backlogBytes: Int

    public init(time: Double, capacity: Int, sentBytes: UInt64, deliveredBytes: UInt64, deliveredPackets: UInt64, drops: UInt64, backlogBytes: Int) {
        self.time = time
        self.capacity = capacity
        self.sentBytes = sentBytes
        self.deliveredBytes = deliveredBytes
        self.deliveredPackets = deliveredPackets
        self.drops = drops
        self.backlogBytes = backlogBytes
    }

    /// Queueing delay a packet arriving now would see: the backlog drained at the capacity.
    public var queueMilliseconds: Double { Double(backlogBytes * 8) / Double(capacity) * 1000 }
}

/// A capacity schedule: phases of constant capacity, back to back.
public struct CapacitySchedule: Sendable, Equatable {
    public struct Phase: Sendable, Equatable {
        public var capacity: Int
        public var seconds: Double
        public init(capacity: Int, seconds: Double) {
            self.capacity = capacity
            self.seconds = seconds
        }
    }

    public var phases: [Phase]

    public init(phases: [Phase]) { self.phases = phases }

    /// RFC 8867 §5.1 (variable available capacity, single flow): 1.0, 2.5, 0.6, 1.0 Mbit/s at
    /// 0, 40, 60 and 80 s, 100 s in all.
    public static let rfc8867 = CapacitySchedule(phases: [
        Phase(capacity: 1_000_000, seconds: 40), Phase(capacity: 2_500_000, seconds: 20),
        Phase(capacity: 600_000, seconds: 20), Phase(capacity: 1_000_000, seconds: 20),
    ])

    /// RFC 8867 §5.2 (congested feedback link, media both ways), 100 s: toward B 2.0, 1.0, 0.5,
    /// 2.0 Mbit/s at 0, 20, 40 and 60 s; toward A 2.0, 0.8, 2.0 Mbit/s at 0, 35 and 70 s. `short`
    /// halves every phase (50 s).
    public static func rfc8867BothWays(short: Bool = false) -> (forward: CapacitySchedule, reverse: CapacitySchedule) {
        let scale = short ? 0.5 : 1
        func schedule(_ phases: [(Int, Double)]) -> CapacitySchedule {
            CapacitySchedule(phases: phases.map { Phase(capacity: $0.0, seconds: $0.1 * scale) })
        }
        return (schedule([(2_000_000, 20), (1_000_000, 20), (500_000, 20), (2_000_000, 40)]),
                schedule([(2_000_000, 35), (800_000, 35), (2_000_000, 30)]))
    }

    public var duration: Double { phases.reduce(0) { $0 + $1.seconds } }

    /// Start time of each phase.
    public var starts: [Double] {
        var t = 0.0
        return phases.map { p in defer { t += p.seconds }; return t }
    }

    public func capacity(at time: Double) -> Int {
        for (start, phase) in zip(starts, phases) where time < start + phase.seconds && time >= start { return phase.capacity }
        return phases.last?.capacity ?? 0
    }

    /// Parses "KBIT:SECONDS,..." (e.g. "1000:40,2500:20,600:20,1000:20").
    public init(parsing text: String) throws(ScheduleError) {
        var phases: [Phase] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let kbit = Int(parts[0]), let seconds = Double(parts[1]),
                  (50...100_000).contains(kbit), seconds >= 1, seconds <= 3600 else {
                throw ScheduleError(description: "a phase is KBIT:SECONDS with 50-100000 kbit/s and 1-3600 s, not '\(item)'")
            }
            phases.append(Phase(capacity: kbit * 1000, seconds: seconds))
        }
        self.phases = phases
    }

    public struct ScheduleError: Error, CustomStringConvertible {
        public let description: String
    }
}

/// What one run did in one phase of the schedule.
public struct PhaseMetrics: Sendable, Equatable {
    public var start: Double
    public var capacity: Int
    /// Delivered bits over capacity x duration.
    public var utilization: Double
    public var queueP50: Double, queueP95: Double
    /// Dropped packets over packets offered to the bottleneck.
    public var loss: Double
    /// After a fall in capacity: seconds until the sender's rate (200 ms window) is below it.
    public var secondsToFallBelow: Double?
    /// At the start and after a rise: seconds until the delivered rate (500 ms window) reaches
    /// 90 % of the capacity.
    public var secondsTo90Percent: Double?
    /// Swings of the sender's one-second rate from above the capacity to below 80 % of it.
    public var oscillations: Int
    public var modeSwitches: Int
}

public enum CongestionMetrics {
    /// Per-phase figures from samples taken every 100 ms (sorted by time) and the times of the
    /// sender's mode switches.
    public static func compute(samples: [BottleneckSample], schedule: CapacitySchedule, modeSwitchTimes: [Double]) -> [PhaseMetrics] {
        var result: [PhaseMetrics] = []
        for (index, (start, phase)) in zip(schedule.starts, schedule.phases).enumerated() {
            let end = start + phase.seconds
            let inPhase = samples.filter { $0.time >= start && $0.time <= end }
            guard let first = inPhase.first, let last = inPhase.last, last.time > first.time else { continue }
            let capacity = Double(phase.capacity)
            let delivered = Double(last.deliveredBytes - first.deliveredBytes) * 8
            let queue = inPhase.map(\.queueMilliseconds).sorted()
            let drops = Double(last.drops - first.drops)
            let offered = Double(last.deliveredPackets - first.deliveredPackets) + drops
            var metrics = PhaseMetrics(start: start, capacity: phase.capacity,
                                       utilization: delivered / (capacity * (last.time - first.time)),
                                       queueP50: percentile(queue, 0.5), queueP95: percentile(queue, 0.95),
                                       loss: offered > 0 ? drops / offered : 0,
                                       oscillations: 0,
                                       modeSwitches: modeSwitchTimes.filter { $0 >= start && $0 < end }.count)
            let previous = index > 0 ? schedule.phases[index - 1].capacity : 0
            if phase.capacity < previous {
                metrics.secondsToFallBelow = firstTime(in: samples, from: start, until: end, window: 0.2, counter: \.sentBytes) { $0 < capacity }.map { $0 - start }
            }
            if phase.capacity > previous {
                metrics.secondsTo90Percent = firstTime(in: samples, from: start, until: end, window: 0.5, counter: \.deliveredBytes) { $0 >= 0.9 * capacity }.map { $0 - start }
            }
            metrics.oscillations = swings(in: samples, from: start + 2, until: end, capacity: capacity)
            result.append(metrics)
        }
        return result
    }

    /// One of callend's targets judged on a run: met, not met (with the phase that missed it
    /// and its figure), or nil when the schedule has nothing to judge it on (no fall in capacity).
    public struct Target: Sendable, Equatable {
        public var name: String
        public var met: Bool?
        /// The first phase that missed it, with its figure.
        public var firstMiss: String?

        public var summary: String {
            "\(name): " + (met.map { $0 ? "met" : "NOT met" + (firstMiss.map { " (\($0))" } ?? "") } ?? "nothing to judge in this schedule")
        }
    }

    /// callend's targets for a run's phases. Every fall and every rise to the top capacity
    /// counts: one the sender never answered is not met.
    public static func targets(_ phases: [PhaseMetrics], schedule: CapacitySchedule) -> [Target] {
        func previous(_ m: PhaseMetrics) -> Int {
            guard let i = schedule.starts.firstIndex(where: { abs($0 - m.start) < 0.001 }), i > 0 else { return 0 }
            return schedule.phases[i - 1].capacity
        }
        let top = phases.map(\.capacity).max()
        func judge(_ name: String, _ some: [PhaseMetrics], _ figure: (PhaseMetrics) -> Double?, _ format: String, _ good: (Double) -> Bool) -> Target {
            guard !some.isEmpty else { return Target(name: name, met: nil) }
            let missed = some.first { figure($0).map(good) != true }
            return Target(name: name, met: missed == nil, firstMiss: missed.map { m in
                (figure(m).map { String(format: format, $0) } ?? "never") + String(format: " at %.0f s", m.start)
            })
        }
        return [judge("below capacity <= 0.5 s after the drop", phases.filter { $0.capacity < previous($0) }, \.secondsToFallBelow, "%.1f s") { $0 <= 0.5 },
                judge("utilization >= 0.9 in every phase", phases, \.utilization, "%.3f") { $0 >= 0.9 },
                judge("queueing p95 <= 60 ms in every phase", phases, \.queueP95, "%.0f ms") { $0 <= 60 },
                judge("90 % of the top capacity within 5 s", phases.filter { $0.capacity == top && $0.capacity > previous($0) },
                      \.secondsTo90Percent, "%.1f s") { $0 <= 5 }]
    }

    /// Bit rate of `counter` over the window ending at sample `i`.
    static func rate(_ samples: [BottleneckSample], _ i: Int, window: Double, counter: KeyPath<BottleneckSample, UInt64>) -> Double? {
        var j = i
        while j > 0 && samples[i].time - samples[j].time < window - 0.001 { j -= 1 }
        let span = samples[i].time - samples[j].time
        guard span > 0 else { return nil }
        return Double(samples[i][keyPath: counter] - samples[j][keyPath: counter]) * 8 / span
    }

    static func firstTime(in samples: [BottleneckSample], from start: Double, until end: Double, window: Double,
                          counter: KeyPath<BottleneckSample, UInt64>, _ condition: (Double) -> Bool) -> Double? {
        for i in samples.indices where samples[i].time > start && samples[i].time <= end {
            // The window must lie inside the phase: a rate made partly before it says nothing.
            guard samples[i].time - window >= start - 0.001, let r = rate(samples, i, window: window, counter: counter) else { continue }
            if condition(r) { return samples[i].time }
        }
        return nil
    }

    static func swings(in samples: [BottleneckSample], from start: Double, until end: Double, capacity: Double) -> Int {
        var count = 0
        var above = false
        for i in samples.indices where samples[i].time >= start + 1 && samples[i].time <= end {
            guard let r = rate(samples, i, window: 1, counter: \.sentBytes) else { continue }
            if r > capacity { above = true } else if above && r < 0.8 * capacity { count += 1; above = false }
        }
        return count
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
}
