import Testing
@testable import Benchmarks
import CallEndpoint

/// The congestion bench's per-phase figures, from sample series whose answers are known.
@Suite struct CongestionMetricsTests {
    /// Samples every 100 ms from rate functions (bit/s) and a backlog function (bytes).
    static func samples(schedule: CapacitySchedule, sent: (Double) -> Double, delivered: (Double) -> Double,
                        backlog: (Double) -> Int = { _ in 0 }, dropsPerSecond: (Double) -> Double = { _ in 0 }) -> [BottleneckSample] {
        var result: [BottleneckSample] = []
        var s = 0.0, d = 0.0, drops = 0.0
        for i in 0...Int(schedule.duration * 10) {
            let t = Double(i) / 10
            if i > 0 {
                s += sent(t) / 8 / 10
                d += delivered(t) / 8 / 10
                drops += dropsPerSecond(t) / 10
            }
            result.append(BottleneckSample(time: t, capacity: schedule.capacity(at: t), sentBytes: UInt64(s), deliveredBytes: UInt64(d),
                                           deliveredPackets: UInt64(d / 1000), drops: UInt64(drops), backlogBytes: backlog(t)))
        }
        return result
    }

    @Test func phaseFiguresFollowTheSamples() {
        let schedule = CapacitySchedule(phases: [.init(capacity: 1_000_000, seconds: 10), .init(capacity: 500_000, seconds: 10),
                                                 .init(capacity: 2_000_000, seconds: 10)])
        // Phase 1: ramps to 1 Mbit/s over the first 2 s, then full. Phase 2: the sender keeps
        // 1 Mbit/s for 0.8 s after the drop, then 450 kbit/s; a 25 kB queue for those 0.8 s.
        // Phase 3: 1 Mbit/s for 3 s, then 2 Mbit/s.
        let sent: (Double) -> Double = { t in
            t <= 10 ? min(1, t / 2) * 1_000_000 : t <= 10.8 ? 1_000_000 : t <= 20 ? 450_000 : t <= 23 ? 1_000_000 : 2_000_000
        }
        let delivered: (Double) -> Double = { t in t > 10 && t <= 10.8 ? 500_000 : sent(t) }
        let samples = Self.samples(schedule: schedule, sent: sent, delivered: delivered,
                                   backlog: { t in t > 10 && t <= 10.8 ? 25_000 : 0 }, dropsPerSecond: { t in t > 10 && t <= 10.8 ? 10 : 0 })
        let phases = CongestionMetrics.compute(samples: samples, schedule: schedule, modeSwitchTimes: [10.5, 23.2, 25])
        #expect(phases.count == 3)
        let (first, drop, rise) = (phases[0], phases[1], phases[2])
        #expect(abs(first.utilization - 0.9) < 0.02, "\(first.utilization)")  // 1 s lost to the 2 s ramp
        #expect(first.secondsTo90Percent.map { abs($0 - 2.0) < 0.2 } == true, "\(String(describing: first.secondsTo90Percent))")
        #expect(first.secondsToFallBelow == nil && first.queueP95 == 0 && first.loss == 0)
        #expect(drop.secondsToFallBelow.map { abs($0 - 0.9) < 0.15 } == true, "\(String(describing: drop.secondsToFallBelow))")
        #expect(drop.queueP50 == 0 && abs(drop.queueP95 - 400) < 1, "\(drop.queueP95)")  // 25 kB at 500 kbit/s = 400 ms
        // 8 drops against 567 packets delivered (567.5 kB in 1 kB packets).
        #expect(abs(drop.loss - 8.0 / 575) < 0.002, "\(drop.loss)")
        #expect(drop.modeSwitches == 1 && rise.modeSwitches == 2)
        #expect(rise.secondsTo90Percent.map { abs($0 - 3.2) < 0.3 } == true, "\(String(describing: rise.secondsTo90Percent))")
        #expect(rise.secondsToFallBelow == nil)
        #expect(rise.oscillations == 0)
    }

    @Test func swingsAcrossTheCapacityCountAsOscillations() {
        let schedule = CapacitySchedule(phases: [.init(capacity: 1_000_000, seconds: 20)])
        // Two seconds at 1.3 Mbit/s, two at 0.5, over and over. Counting starts 2 s into the
        // phase with a one-second window, so the swings ending at 7, 11, 15 and 19 s count.
        let rate: (Double) -> Double = { t in Int(t / 2) % 2 == 0 ? 1_300_000 : 500_000 }
        let samples = Self.samples(schedule: schedule, sent: rate, delivered: { min(rate($0), 1_000_000) })
        let phase = CongestionMetrics.compute(samples: samples, schedule: schedule, modeSwitchTimes: [])[0]
        #expect(phase.oscillations == 4, "\(phase.oscillations)")
    }

    @Test func bothWaysFollowsRFC8867Section5_2() {
        let (forward, reverse) = CapacitySchedule.rfc8867BothWays()
        #expect(forward.starts == [0, 20, 40, 60] && forward.duration == 100)
        #expect(forward.phases.map(\.capacity) == [2_000_000, 1_000_000, 500_000, 2_000_000])
        #expect(reverse.starts == [0, 35, 70] && reverse.duration == 100)
        #expect(reverse.phases.map(\.capacity) == [2_000_000, 800_000, 2_000_000])
        let short = CapacitySchedule.rfc8867BothWays(short: true)
        #expect(short.forward.starts == [0, 10, 20, 30] && short.forward.duration == 50)
        #expect(short.reverse.starts == [0, 17.5, 35] && short.reverse.duration == 50)
    }

    @Test func theReportOfBothWaysJudgesEachDirectionOnItsOwnSchedule() {
        let (forward, reverse) = CapacitySchedule.rfc8867BothWays(short: true)
        func run(_ name: String, _ schedule: CapacitySchedule, share: Double) -> CongestionBenchmark.Run {
            let samples = Self.samples(schedule: schedule, sent: { Double(schedule.capacity(at: $0)) * share },
                                       delivered: { Double(schedule.capacity(at: $0)) * share })
            return CongestionBenchmark.Run(name: name, schedule: schedule, samples: samples, modeSwitchTimes: [],
                                           phases: CongestionMetrics.compute(samples: samples, schedule: schedule, modeSwitchTimes: []))
        }
        let report = CongestionBenchmark.report([run("callend A>B", forward, share: 0.95), run("callend B>A", reverse, share: 0.5),
                                                 run("aiortc A>B", forward, share: 0.8), run("aiortc B>A", reverse, share: 0.8)], burstBytes: 4000)
        #expect(report.contains("schedules A>B 2000k/10s 1000k/10s 500k/10s 2000k/20s; B>A 2000k/17s 800k/17s 2000k/15s"), "\(report)")
        #expect(report.contains("ratios callend A>B / aiortc A>B per phase") && report.contains("ratios callend B>A / aiortc B>A per phase"))
        let targets = report.split(separator: "\n").filter { $0.contains(" targets: ") }
        #expect(targets.count == 2)
        // A>B used 0.95 of each of its phases, B>A half of each of its own.
        #expect(targets.first { $0.hasPrefix("callend A>B") }?.contains("utilization >= 0.9 in every phase: met") == true, "\(targets)")
        #expect(targets.first { $0.hasPrefix("callend B>A") }?.contains("utilization >= 0.9 in every phase: NOT met (0.49") == true, "\(targets)")
    }

    @Test func schedulesParseAndRefuseBadPhases() throws {
        #expect(try CapacitySchedule(parsing: "1000:40,2500:20,600:20,1000:20") == .rfc8867)
        #expect(CapacitySchedule.rfc8867.duration == 100 && CapacitySchedule.rfc8867.starts == [0, 40, 60, 80])
        #expect(CapacitySchedule.rfc8867.capacity(at: 65) == 600_000)
        for bad in ["", "1000", "1000:", ":40", "1000:40:1", "fast:40", "1000:0", "40:10", "1000:40,,600:20", "1000:1e9"] {
            #expect(throws: CapacitySchedule.ScheduleError.self, "'\(bad)'") { try CapacitySchedule(parsing: bad) }
        }
    }
}

/// callend's targets judged on a run's phases.
@Suite struct CongestionTargetTests {
    static func phase(_ start: Double, _ capacity: Int, utilization: Double = 0.95, queue: Double = 20,
                      fall: Double? = nil, reach: Double? = nil) -> PhaseMetrics {
        PhaseMetrics(start: start, capacity: capacity, utilization: utilization, queueP50: 0, queueP95: queue, loss: 0,
                     secondsToFallBelow: fall, secondsTo90Percent: reach, oscillations: 0, modeSwitches: 0)
    }

    @Test func aScheduleWithoutAFallHasNothingToJudgeTheFallOn() {
        let schedule = try! CapacitySchedule(parsing: "1000:15,2500:20")
        let targets = CongestionMetrics.targets([Self.phase(0, 1_000_000, reach: 0.5), Self.phase(15, 2_500_000, reach: 1.5)], schedule: schedule)
        #expect(targets.map(\.met) == [nil, true, true, true], "\(targets.map(\.summary))")
        #expect(targets[0].summary.hasSuffix("nothing to judge in this schedule"))
    }

    @Test func everyFallAndEveryRiseToTheTopCounts() {
        // Two falls: the second never went below the capacity (no figure); two rises to the top:
        // the second took 6 s.
        let schedule = try! CapacitySchedule(parsing: "2500:10,600:10,2500:10,600:10")
        let phases = [Self.phase(0, 2_500_000, reach: 1), Self.phase(10, 600_000, fall: 0.3),
                      Self.phase(20, 2_500_000, reach: 6), Self.phase(30, 600_000, utilization: 0.899, queue: 61)]
        let targets = CongestionMetrics.targets(phases, schedule: schedule)
        #expect(targets.map(\.met) == [false, false, false, false])
        #expect(targets.map(\.firstMiss) == ["never at 30 s", "0.899 at 30 s", "61 ms at 30 s", "6.0 s at 20 s"])
        #expect(targets[1].summary == "utilization >= 0.9 in every phase: NOT met (0.899 at 30 s)")
    }
}
