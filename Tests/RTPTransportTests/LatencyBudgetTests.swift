import MediaCore
import Testing

/// The hop-by-hop account of a stream's latency: totals and counts that subtract between
/// snapshots into an interval's means.
struct LatencyBudgetTests {
    @Test func meansPerHopMergeAndSubtract() {
        var budget = LatencyBudget()
        #expect(budget.meanMilliseconds(.encode) == nil && budget.meansMilliseconds.isEmpty)
        budget.add(.encode, .milliseconds(4))
        budget.add(.encode, .microseconds(6_500))
        budget.add(.jitterBuffer, .milliseconds(20))
        budget.add(.decode, .milliseconds(-3))  // clocks that disagree: not counted
        #expect(budget.count(.encode) == 2 && budget.count(.decode) == 0)
        #expect(budget.meanMilliseconds(.encode) == 5.25)
        #expect(budget.meansMilliseconds == ["encode": 5.3, "jitterBuffer": 20])
        let snapshot = budget
        var pacing = LatencyBudget()
        pacing.add(.pacing, .milliseconds(1))
        budget.merge(pacing)
        budget.add(.encode, .milliseconds(10))
        let interval = budget.subtracting(snapshot)
        #expect(interval.count(.encode) == 1 && interval.meanMilliseconds(.encode) == 10)
        #expect(interval.meanMilliseconds(.pacing) == 1 && interval.count(.jitterBuffer) == 0)
        #expect(interval.meansMilliseconds == ["encode": 10, "pacing": 1])
        #expect(budget != snapshot && budget.subtracting(interval) == snapshot)
    }
}
