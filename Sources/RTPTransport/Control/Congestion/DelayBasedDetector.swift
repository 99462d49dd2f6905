/// The delay half of send-side bandwidth estimation (the GCC family, draft-ietf-rmcat-gcc-02 §5):
/// packets are grouped into bursts by send time, each burst's arrival spacing is compared with
/// its send spacing, the accumulated difference (queueing delay growth) is smoothed, and the slope
/// of a least-squares line through the recent points says whether the bottleneck queue is
/// growing. The slope is compared with an adaptive threshold, so a competing flow's steady
/// queue does not starve this one. Pure: times are microseconds passed in.
public struct DelayBasedDetector: Sendable {
    public enum Usage: String, Sendable, Equatable {
        case normal, overusing, underusing
    }

    /// Packets sent within this span form one group (a frame's packets leave together).
    public var burstSpan: Int64 = 5_000
    /// Points in the regression window.
    public var windowSize = 20
    /// Smoothing of the accumulated delay (exponential, per group).
    public var smoothing = 0.9
    public var thresholdGain = 4.0
    /// Adaptive threshold in ms and its limits; it rises fast and falls slowly (k_up, k_down).
    public private(set) var threshold = 12.5
    public var thresholdLimits = 6.0...600.0
    public var thresholdUp = 0.0087
    public var thresholdDown = 0.039
    /// Overuse must last this long before it is signalled.
    public var overuseTime: Int64 = 10_000
    /// A standing queue this much above the lowest delay of the last `baseWindow` is overuse
    /// even when the trend has flattened (a queue the slope alone would leave in place).
    public var queueLimit = 50.0
    public var baseWindow: Int64 = 10_000_000

    struct Group {
        var firstSent: Int64
        var lastSent: Int64
        var lastArrival: Int64
        var size: Int
    }

    private var current: Group?
    private var previous: Group?
    /// The accumulated delay variation, ms (its minimum is the path without queue).
    public private(set) var accumulated = 0.0
    private var smoothed = 0.0
    private var points: [(x: Double, y: Double)] = []
    private var firstArrival: Int64?
    private var deltas = 0
    private var lastThresholdUpdate: Int64?
    private var overuseStart: Int64?
    private var overuseCount = 0
    public private(set) var usage: Usage = .normal
    /// The last modified trend (ms), for logs and tests.
    public private(set) var trend = 0.0
    /// Queueing delay estimate, ms: the accumulated delay variation above its recent minimum.
    public private(set) var queueDelay = 0.0
    private var minima: [(time: Int64, value: Double)] = []

    public init() {}

    /// Feeds one received packet (in send order). Returns the usage after it.
    @discardableResult
    public mutating func update(sent: Int64, arrived: Int64, size: Int) -> Usage {
        guard var group = current else {
            current = Group(firstSent: sent, lastSent: sent, lastArrival: arrived, size: size)
            return usage
        }
        if sent - group.firstSent <= burstSpan || arrived < group.lastArrival {
            // Same burst (or reordered): extend it.
            group.lastSent = max(group.lastSent, sent)
            group.lastArrival = max(group.lastArrival, arrived)
            group.size += size
            current = group
            return usage
        }
        // A new burst begins: the finished one is compared with the one before it.
        if let before = previous { compare(before, group) }
        previous = group
        current = Group(firstSent: sent, lastSent: sent, lastArrival: arrived, size: size)
        return usage
    }

    private mutating func compare(_ a: Group, _ b: Group) {
        let sendDelta = Double(b.lastSent - a.lastSent) / 1000
        let arrivalDelta = Double(b.lastArrival - a.lastArrival) / 1000
        let variation = arrivalDelta - sendDelta
        deltas = min(deltas + 1, 1000)
        accumulated += variation
        // Sliding minimum of the accumulated delay over the base window (a monotonic queue).
        while let last = minima.last, last.value >= accumulated { minima.removeLast() }
        minima.append((b.lastArrival, accumulated))
        while let first = minima.first, first.time < b.lastArrival - baseWindow { minima.removeFirst() }
        queueDelay = accumulated - (minima.first?.value ?? accumulated)
        smoothed = smoothing * smoothed + (1 - smoothing) * accumulated
        let origin = firstArrival ?? b.lastArrival
        firstArrival = origin
        points.append((Double(b.lastArrival - origin) / 1000, smoothed))
        if points.count > windowSize { points.removeFirst(points.count - windowSize) }
        guard points.count >= 2 else { return }
        let slope = Self.slope(points) ?? 0
        trend = slope * Double(min(deltas, 60)) * thresholdGain
        detect(now: b.lastArrival, sendDelta: sendDelta)
    }

    static func slope(_ points: [(x: Double, y: Double)]) -> Double? {
        let n = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.x } / n
        let meanY = points.reduce(0) { $0 + $1.y } / n
        var numerator = 0.0, denominator = 0.0
        for p in points {
            numerator += (p.x - meanX) * (p.y - meanY)
            denominator += (p.x - meanX) * (p.x - meanX)
        }
        return denominator == 0 ? nil : numerator / denominator
    }

    private mutating func detect(now: Int64, sendDelta: Double) {
        if trend > threshold {
            if overuseStart == nil { overuseStart = now - Int64(sendDelta * 500) }
            overuseCount += 1
            if let start = overuseStart, now - start >= overuseTime, overuseCount > 1 { usage = .overusing }
        } else if trend < -threshold {
            overuseStart = nil
            overuseCount = 0
            usage = .underusing
        } else if queueDelay > queueLimit && trend >= 0 {
            // Not growing, not draining, but standing too high.
            usage = .overusing
        } else {
            overuseStart = nil
            overuseCount = 0
            usage = .normal
        }
        adaptThreshold(now: now)
    }

    private mutating func adaptThreshold(now: Int64) {
        defer { lastThresholdUpdate = now }
        guard let last = lastThresholdUpdate else { return }
        let magnitude = abs(trend)
        // A sudden huge trend (a route change, a burst) does not drag the threshold with it.
        if magnitude > threshold + 15 { return }
        let k = magnitude < threshold ? thresholdDown : thresholdUp
        let elapsed = Double(min(now - last, 100_000)) / 1000
        threshold = min(max(threshold + k * (magnitude - threshold) * elapsed, thresholdLimits.lowerBound), thresholdLimits.upperBound)
    }
}
