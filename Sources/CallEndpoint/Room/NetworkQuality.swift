/// A network-quality score per direction, 0 (unusable) to 5 (nothing to complain about), from
/// what the endpoint measures each second. Each impairment costs points up to a cap, so one bad
/// figure cannot hide behind good ones nor sink the score on its own:
///
/// | impairment | cost | at most |
/// | --- | --- | --- |
/// | loss | 0.25 per percent | 2.5 |
/// | round trip above 100 ms | 1 per 200 ms | 2 |
/// | jitter above 20 ms | 1 per 50 ms | 1 |
/// | freezes (300 ms or more) in the second | 1 each | 2 |
/// | the estimate below what the video mode needs | 2 x the shortfall (0 ... 1) | 2 |
public enum NetworkQuality {
    public static func score(lossPercent: Double, rttMs: Double?, jitterMs: Double = 0, freezes: Int = 0, shortfall: Double = 0) -> Double {
        var score = 5.0
        score -= min(2.5, max(0, lossPercent) * 0.25)
        if let rttMs { score -= min(2, max(0, rttMs - 100) / 200) }
        score -= min(1, max(0, jitterMs - 20) / 50)
        score -= min(2, Double(max(0, freezes)))
        score -= min(2, 2 * min(1, max(0, shortfall)))
        return (max(0, min(5, score)) * 10).rounded() / 10
    }

    /// How far `estimateKbps` falls short of what a mode written "WxH@F" needs (0 when it does not).
    public static func shortfall(estimateKbps: Int?, mode: String?) -> Double {
        guard let estimateKbps, let mode else { return 0 }
        let parts = mode.split(whereSeparator: { $0 == "x" || $0 == "@" }).compactMap { Int($0) }
        guard parts.count == 3, parts.allSatisfy({ $0 > 0 }) else { return 0 }
        let needed = Double(VideoMode(width: parts[0], height: parts[1], frameRate: parts[2]).neededBitrate) / 1000
        return max(0, 1 - Double(estimateKbps) / needed)
    }
}
