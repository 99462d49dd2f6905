import FoundationEssentials
import Glibc

/// The bandwidth estimate when the receiver sends no transport-cc feedback (a WHIP server that
/// negotiated none): loss-based control from the fraction lost in its RTCP reception reports,
/// after the loss-based controller of draft-ietf-rmcat-gcc-02 §6: under 2 % lost the estimate
/// grows 8 % a second, over 10 % it falls by half the loss, between the two it holds. A REMB
/// from the receiver (draft-alvestrand-rmcat-remb) caps it. Pure: time in µs is passed in.
public struct ReportedLossEstimator: Sendable {
    public private(set) var estimate: Int
    /// The fraction lost in the newest report on our video.
    public private(set) var lossFraction = 0.0
    /// The newest REMB: the receiver's own ceiling.
    public private(set) var receiverLimit: Int?
    let minBitrate: Int
    let maxBitrate: Int
    private var lastReport: Int64?

    static let increaseBelow = 0.02
    static let decreaseAbove = 0.10
    static let growthPerSecond = 1.08

    public init(configuration: BandwidthEstimator.Configuration) {
        estimate = configuration.startBitrate
        minBitrate = configuration.minBitrate
        maxBitrate = configuration.maxBitrate
    }

    /// A reception report on our video, its fraction lost in 1/256 (RFC 3550 §6.4.1).
    public mutating func onReport(fractionLost: UInt8, now: Int64) -> BandwidthEstimator.Change? {
        let loss = Double(fractionLost) / 256
        lossFraction = loss
        // Growth follows the time between reports (about a second), at most a second's worth.
        let elapsed = lastReport.map { Double(max(0, now - $0)) / 1_000_000 } ?? 1
        lastReport = now
        if loss > Self.decreaseAbove { return set(Int(Double(estimate) * (1 - 0.5 * loss)), cause: .loss, now: now) }
        if loss < Self.increaseBelow {
            return set(Int((Double(estimate) * pow(Self.growthPerSecond, min(1, elapsed))).rounded(.up)), cause: .increase, now: now)
        }
        return nil
    }

    /// A REMB: the estimate goes no higher than what the receiver says it takes.
    public mutating func onREMB(bitrate: Int, now: Int64) -> BandwidthEstimator.Change? {
        receiverLimit = bitrate
        return estimate > bitrate ? set(bitrate, cause: .remb, now: now) : nil
    }

    private mutating func set(_ value: Int, cause: BandwidthEstimator.Cause, now: Int64) -> BandwidthEstimator.Change? {
        let bounded = max(minBitrate, min(value, maxBitrate, receiverLimit ?? .max))
        guard bounded != estimate else { return nil }
        defer { estimate = bounded }
        return BandwidthEstimator.Change(time: now, cause: cause, from: estimate, to: bounded)
    }
}
