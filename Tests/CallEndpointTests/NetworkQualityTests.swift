import Testing
@testable import CallEndpoint

@Suite struct NetworkQualityTests {
    @Test func aCleanPathScoresFive() {
        #expect(NetworkQuality.score(lossPercent: 0, rttMs: 30, jitterMs: 5) == 5)
    }

    @Test func eachImpairmentCostsUpToItsCap() {
        #expect(NetworkQuality.score(lossPercent: 4, rttMs: 30) == 4)
        #expect(NetworkQuality.score(lossPercent: 50, rttMs: 30) == 2.5, "loss costs at most 2.5")
        #expect(NetworkQuality.score(lossPercent: 0, rttMs: 300) == 4)
        #expect(NetworkQuality.score(lossPercent: 0, rttMs: 5000) == 3, "the round trip costs at most 2")
        #expect(NetworkQuality.score(lossPercent: 0, rttMs: nil, jitterMs: 45) == 4.5)
        #expect(NetworkQuality.score(lossPercent: 0, rttMs: nil, freezes: 1) == 4)
        #expect(NetworkQuality.score(lossPercent: 0, rttMs: nil, shortfall: 0.5) == 4)
        #expect(NetworkQuality.score(lossPercent: 30, rttMs: 900, jitterMs: 200, freezes: 5, shortfall: 1) == 0)
    }

    @Test func theShortfallIsAgainstWhatTheModeNeeds() {
        // 640x480@30 needs 737 kbit/s.
        #expect(NetworkQuality.shortfall(estimateKbps: 2000, mode: "640x480@30") == 0)
        #expect(abs(NetworkQuality.shortfall(estimateKbps: 368, mode: "640x480@30") - 0.5) < 0.01)
        #expect(NetworkQuality.shortfall(estimateKbps: nil, mode: "640x480@30") == 0)
        #expect(NetworkQuality.shortfall(estimateKbps: 100, mode: "nonsense") == 0)
    }
}
