import Testing
import TestSupport
@testable import CallEndpoint

struct PercentileSketchTests {
    /// Against exact percentiles of the same values: within 1 % (0.01 ms near zero).
    @Test func percentilesAreWithinOnePercentOfExact() {
        var generator = SeededGenerator(seed: 7)
        let values = (0..<50_000).map { _ in Double.random(in: 0...1, using: &generator) < 0.9
            ? Double.random(in: 5...40, using: &generator) : Double.random(in: 40...3000, using: &generator) }
        let sketch = PercentileSketch(values)
        let sorted = values.sorted()
        for p in [0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0] {
            let exact = sorted[max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
            let estimate = sketch.percentile(p)!
            #expect(abs(estimate - exact) <= max(0.01, exact * 0.01), "p\(p): \(estimate) vs \(exact)")
        }
        #expect(sketch.count == 50_000)
        #expect(PercentileSketch().percentile(0.5) == nil)
    }

    /// A month of frames at 30 fps goes into the same fixed number of buckets; what came in one
    /// interval is the difference of two snapshots.
    @Test func aLongCallTakesFixedMemoryAndIntervalsSubtract() {
        var sketch = PercentileSketch()
        for n in 0..<100_000 { sketch.add(Double(n % 50)) }
        let before = sketch
        for _ in 0..<30 { sketch.add(500) }
        let interval = sketch.subtracting(before)
        #expect(interval.count == 30)
        #expect(abs(interval.percentile(0.5)! - 500) <= 5)
        #expect(sketch.count == 100_030)
        sketch.add(.infinity)
        sketch.add(-3)
        sketch.add(1e12)
        #expect(sketch.count == 100_032, "infinity is not a latency; negatives count as 0, huge ones in the last bucket")
    }
}
