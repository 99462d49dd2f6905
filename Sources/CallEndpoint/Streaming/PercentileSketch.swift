import Dispatch
import FoundationEssentials
import Glibc

/// Percentiles of a stream of non-negative values (latencies in ms) in fixed memory, however long
/// the call: counts in logarithmic buckets 2 % wide, so a percentile is within 1 % of the value
/// (and within 0.01 of it near zero). Two sketches of one stream taken at different times
/// subtract to the sketch of what came between, which gives per-interval percentiles too.
public struct PercentileSketch: Sendable, Equatable {
    /// Bucket i holds values v with floor(log(1 + v) / log(1.02)) == i; the last also holds
    /// everything larger (about 10 min).
    static let growth = log(1.02)
    static let bucketCount = 700
    private var buckets = [UInt32](repeating: 0, count: PercentileSketch.bucketCount)
    public private(set) var count = 0
    /// The values' sum (for the mean, which a latency budget's means add up to).
    public private(set) var sum = 0.0

    public init() {}

    public init(_ values: some Sequence<Double>) {
        for v in values { add(v) }
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func add(_ value: Double) {
        guard value.isFinite else { return }
        let index = min(Self.bucketCount - 1, Int(log1p(max(0, value)) / Self.growth))
        buckets[index] &+= 1
        count += 1
        sum += max(0, value)
    }

    /// The mean of the values, or nil when empty.
    public var mean: Double? { count > 0 ? sum / Double(count) : nil }

    public mutating func add(contentsOf values: some Sequence<Double>) {
        for v in values { add(v) }
    }

    /// The value below which a fraction `p` (0 ... 1) of the values lie (nearest rank), or nil
    /// when empty.
    public func percentile(_ p: Double) -> Double? {
        guard count > 0 else { return nil }
        let rank = max(1, Int((min(1, max(0, p)) * Double(count)).rounded(.up)))
        var seen = 0
        for (i, n) in buckets.enumerated() where n > 0 {
            seen += Int(n)
            if seen >= rank { return Self.middle(of: i) }
        }
        return Self.middle(of: Self.bucketCount - 1)
    }

    /// What was added to this sketch since `earlier` (a copy of it taken before).
    public func subtracting(_ earlier: PercentileSketch) -> PercentileSketch {
        var out = PercentileSketch()
        for i in 0..<Self.bucketCount {
            out.buckets[i] = buckets[i] >= earlier.buckets[i] ? buckets[i] - earlier.buckets[i] : 0
        }
        out.count = out.buckets.reduce(0) { $0 + Int($1) }
        out.sum = max(0, sum - earlier.sum)
        return out
    }

    private static func middle(of index: Int) -> Double {
        let low = expm1(Double(index) * growth), high = expm1(Double(index + 1) * growth)
        return (low + high) / 2
    }
}
