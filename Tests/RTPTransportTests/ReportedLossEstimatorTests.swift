import Platform
import MediaCore
import Testing
@testable import RTPTransport

/// Auto mode on a receiver that sends no transport-cc (a WHIP server with reports only).
@Suite struct ReportedLossEstimatorTests {
    static var configuration: BandwidthEstimator.Configuration {
        var c = BandwidthEstimator.Configuration()
        (c.startBitrate, c.minBitrate, c.maxBitrate) = (800_000, 50_000, 2_500_000)
        return c
    }

    @Test func growsUnderTwoPercentHoldsToTenAndFallsAbove() throws {
        var e = ReportedLossEstimator(configuration: Self.configuration)
        let first = e.onReport(fractionLost: 0, now: 1_000_000)
        let grown = try #require(first)
        #expect(grown.cause == .increase && grown.to == 864_000, "8 % for a report a second after the last")
        #expect(e.onReport(fractionLost: 13, now: 2_000_000) == nil, "5 % lost: hold")
        let third = e.onReport(fractionLost: 64, now: 3_000_000)
        let cut = try #require(third)
        #expect(cut.cause == .loss && cut.to == Int(864_000.0 * (1 - 0.5 * 0.25)) && e.lossFraction == 0.25)
        // Half a second between reports: half a second's growth.
        let fourth = e.onReport(fractionLost: 2, now: 3_500_000)
        let half = try #require(fourth)
        #expect(abs(Double(half.to) / Double(cut.to) - 1.08.squareRoot()) < 0.001)
    }

    @Test func staysWithinItsBoundsAndUnderTheReceiversREMB() {
        var e = ReportedLossEstimator(configuration: Self.configuration)
        for second in 1...60 { _ = e.onReport(fractionLost: 0, now: Int64(second) * 1_000_000) }
        #expect(e.estimate == 2_500_000)
        let capped = e.onREMB(bitrate: 1_000_000, now: 61_000_000)
        #expect(capped?.cause == .remb && e.estimate == 1_000_000)
        _ = e.onReport(fractionLost: 0, now: 62_000_000)
        #expect(e.estimate == 1_000_000, "growth stops at the receiver's limit")
        for second in 63...120 { _ = e.onReport(fractionLost: 255, now: Int64(second) * 1_000_000) }
        #expect(e.estimate == 50_000)
    }

    /// Two cores without transport-cc: the receiver's reports say what it lost, and the
    /// sender's estimate follows them (before, auto mode had nothing to go on and never moved).
    @Test func aCallWithoutTransportCCFollowsTheReportedLoss() {
        var (ca, cb) = SimulatedCall.configurations()
        (ca.transportSequenceExtensionID, cb.transportSequenceExtensionID) = (nil, nil)
        var call = SimulatedCall(a: ca, b: cb)
        // A third of A's video is lost on the way for the second half.
        final class Loss { var on = false; var count = 0 }
        let loss = Loss()
        call.link = { from, packet, _, _ in
            guard from == .a, RTPSessionCoreTests.isVideo(packet), loss.on else { return .zero }
            loss.count += 1
            return loss.count % 3 == 0 ? nil : .zero
        }
        call.scheduleVideo(from: .a, seconds: 20)
        call.run(until: call.now + .seconds(10))
        let before = call.a.estimate ?? 0
        loss.on = true
        call.run(until: call.now + .seconds(10))
        let estimates = call.actions[.a, default: []].compactMap { entry -> (Int, String)? in
            if case .estimate(let bitrate, _, let cause) = entry.action { return (bitrate, cause) }
            return nil
        }
        #expect(before > 800_000, "reports of no loss let it grow: \(before)")
        #expect(estimates.contains { $0.1 == "loss" }, "\(estimates)")
        #expect((call.a.estimate ?? .max) < before / 2, "\(before) -> \(call.a.estimate ?? 0)")
    }
}
