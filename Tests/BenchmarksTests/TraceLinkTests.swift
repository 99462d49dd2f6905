import Testing
@testable import Benchmarks

/// The cellular link's model: the trace's opportunities, the drop-tail queue, partial packets,
/// lost opportunities, repetition, the delay; and a saturating flow that gets exactly the
/// trace's capacity.
@Suite struct TraceLinkTests {
    @Test func tracesParseAsTheirFilesAreWritten() throws {
        let trace = try CapacityTrace(parsing: "0\n3\n3\n10\n")
        #expect(trace.times == [0, 3, 3, 10] && trace.period == 10)
        #expect(try CapacityTrace(parsing: "5").times == [5], "no newline at the end")
        #expect(abs(trace.meanBitrate - 4.0 * 1504 * 8 * 100) < 1)
        for bad in ["", "0\n", "3\n2\n", "1\n\n2\n", "x\n", "-1\n5\n", "1.5\n"] {
            #expect(throws: CapacityTrace.Malformed.self, "\(bad.debugDescription)") { try CapacityTrace(parsing: bad) }
        }
    }

    /// Opportunities in a span, the trace repeated: 0, 3, 3, 10 | 10, 13, 13, 20 | ...
    @Test func opportunitiesAreCountedInASpanAcrossRepetitions() throws {
        let trace = try CapacityTrace(parsing: "0\n3\n3\n10\n")
        #expect(trace.opportunities(from: 0, to: 10) == 3)
        #expect(trace.opportunities(from: 0, to: 11) == 5)
        #expect(trace.opportunities(from: 0, to: 20) == 7)
        #expect(trace.opportunities(from: 4, to: 14) == 4)
        #expect(trace.opportunities(from: 14, to: 4) == 0)
    }

    @Test func eachOpportunityCarriesOnePacketsWorthInOrderAfterTheDelay() throws {
        // Opportunities at 1, 2 and 2 ms, repeating every 2 ms; 10 ms of delay.
        var link = TraceLink<Int>(trace: try CapacityTrace(times: [1, 2, 2]), queueLimit: 10, delay: 10_000, start: 0)
        for i in 0..<5 { link.arrive(i, size: 1500, at: 0) }
        #expect(link.departures(until: 900).isEmpty, "nothing before the first opportunity")
        let first = link.departures(until: 2_000)
        #expect(first.map(\.packet) == [0, 1, 2] && first.map(\.at) == [11_000, 12_000, 12_000])
        // The trace repeats: 3 ms (1 + 2) and 4 ms.
        let next = link.departures(until: 4_000)
        #expect(next.map(\.packet) == [3, 4] && next.map(\.at) == [13_000, 14_000])
        #expect(link.counters.idleOpportunities == 1, "the second opportunity at 4 ms had nothing to carry")
        #expect(link.counters.delivered == 5 && link.queued == 0)
    }

    @Test func smallPacketsShareAnOpportunityAndABigOneSpillsOver() throws {
        var link = TraceLink<String>(trace: CapacityTrace.constant(everyMilliseconds: 1), queueLimit: 10, delay: 0, start: 0)
        link.arrive("a", size: 500, at: 0)
        link.arrive("b", size: 500, at: 0)
        link.arrive("c", size: 1000, at: 0)  // 504 bytes ride the first opportunity, the rest the next
        #expect(link.departures(until: 1_000).map(\.packet) == ["a", "b"])
        #expect(link.departures(until: 2_000).map(\.packet) == ["c"])
    }

    @Test func aFullQueueDropsTheNewcomerAndAnUnusedOpportunityIsLost() throws {
        var link = TraceLink<Int>(trace: CapacityTrace.constant(everyMilliseconds: 10), queueLimit: 3, delay: 0, start: 0)
        var accepted: [Bool] = []
        for i in 0..<5 { accepted.append(link.arrive(i, size: 1200, at: 0)) }
        #expect(accepted == [true, true, true, false, false] && link.counters.dropped == 2)
        // Nothing queued at 30 ms: that opportunity is gone, a packet at 35 waits for 40.
        #expect(link.departures(until: 30_000).map(\.packet) == [0, 1, 2])
        link.arrive(9, size: 100, at: 35_000)
        let later = link.departures(until: 40_000)
        #expect(later.map(\.packet) == [9] && later.map(\.at) == [40_000])
    }

    /// A flow that keeps the queue from ever emptying gets every byte of every opportunity: per
    /// second, the trace's capacity (a packet split across seconds moves at most one packet).
    @Test func aSaturatingFlowGetsTheTracesCapacityEachSecond() throws {
        // A capacity that changes every second: 2, 6, 1, 12 and 3 packets per 10 ms (2.4 to
        // 14.4 Mbit/s), as a trace.
        var times: [Int64] = []
        for (second, perTen) in [2, 6, 1, 12, 3].enumerated() {
            for ms in 0..<1000 where ms % 10 == 0 {
                for _ in 0..<perTen { times.append(Int64(second * 1000 + ms + 1)) }
            }
        }
        let trace = try CapacityTrace(times: times)
        var link = TraceLink<Int>(trace: trace, queueLimit: 150, delay: 30_000, start: 0)
        var deliveredPerSecond = [Int](repeating: 0, count: 5)
        var sent = 0
        for ms in stride(from: Int64(0), to: 5_000, by: 1) {
            // 20 Mbit/s of 1200-byte packets: more than any second's capacity.
            for _ in 0..<2 {
                link.arrive(sent, size: 1200, at: ms * 1000)
                sent += 1
            }
            for departure in link.departures(until: ms * 1000 + 999) {
                let at = departure.at
                let second = Int((at - 30_000) / 1_000_000)
                if second < 5 { deliveredPerSecond[second] += 1200 * 8 }
            }
        }
        let capacity = trace.capacityPerSecond(seconds: 5)
        for second in 0..<5 {
            #expect(abs(Double(deliveredPerSecond[second]) - capacity[second]) <= 1200 * 8, "second \(second): \(deliveredPerSecond[second]) of \(capacity[second]) bit/s")
        }
    }
}
