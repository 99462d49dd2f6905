import Testing
@testable import RTPTransport

@Suite struct SendPolicyTests {
    @Test func pacingIsALittleAboveTheEstimateExceptRightAfterACut() {
        #expect(SendPolicy.pacing(estimate: 1_000_000, lastDecrease: nil, now: 5_000_000) == .init(rate: 1_100_000, maxDrainRate: 2_000_000))
        #expect(SendPolicy.pacing(estimate: 1_000_000, lastDecrease: 4_500_000, now: 5_000_000) == .init(rate: 1_000_000, maxDrainRate: 1_000_000))
        #expect(SendPolicy.pacing(estimate: 1_000_000, lastDecrease: 3_999_999, now: 5_000_000).rate == 1_100_000, "a second after the cut")
    }

    /// 1 Mbit/s with 30 ms of feedback delay: the window is 1e6 x 0.1 s / 8 = 12.5 kB.
    @Test func videoWaitsWhileThePathHoldsMoreThanTheWindow() {
        func holds(_ bytes: Int, feedbackAge: Int64 = 20_000, base: Int64? = 30_000, queue: Double = 20, bursty: Bool = false) -> Bool {
            SendPolicy.holdsVideo(estimate: 1_000_000, outstandingBytes: bytes, newestFeedbackAt: 1_000_000 - feedbackAge, shortestFeedbackDelay: base,
                                  queueDelay: queue, burstyLink: bursty, now: 1_000_000)
        }
        #expect(!holds(12_500) && holds(12_501))
        #expect(!holds(50_000, queue: 200, bursty: true), "a bursty link: outstanding bytes are the link's hold, not a queue")
        #expect(!holds(50_000, feedbackAge: 500_000), "no feedback for half a second: video goes on")
        #expect(!holds(50_000, base: nil), "no feedback delay known yet")
        #expect(!holds(50_000, queue: 19.9), "no queue on the path: the bytes are outstanding because feedback was lost")
        #expect(!SendPolicy.holdsVideo(estimate: 100_000, outstandingBytes: 6_000, newestFeedbackAt: 0, shortestFeedbackDelay: 0, queueDelay: 50, now: 0), "6 kB always fit")
        #expect(SendPolicy.holdsVideo(estimate: 100_000, outstandingBytes: 6_001, newestFeedbackAt: 0, shortestFeedbackDelay: 0, queueDelay: 50, now: 0))
    }

    @Test func picturesAreSkippedBehindMoreThan100msOfQueue() {
        #expect(!SendPolicy.skipsPicture(pacerQueueDelay: 100_000) && SendPolicy.skipsPicture(pacerQueueDelay: 100_001))
    }

    /// Half the estimate per second: 500 kbit/s is 62.5 kB a second at 1 Mbit/s.
    @Test func retransmissionsStayWithinHalfTheEstimate() {
        var budget = RetransmissionBudget()
        var admitted = 0
        for i in 0..<100 where budget.admit(bytes: 1_250, estimate: 1_000_000, pacerQueueDelay: 0, now: Int64(i) * 1_000) { admitted += 1 }
        #expect(admitted == 50, "62.5 kB in 1250-byte packets")
        let later = budget.admit(bytes: 1_250, estimate: 1_000_000, pacerQueueDelay: 0, now: 1_000_001)
        #expect(later, "the first one has left the last second")
        var backedUp = RetransmissionBudget()
        let refused = backedUp.admit(bytes: 100, estimate: 1_000_000, pacerQueueDelay: 150_001, now: 0)
        let taken = backedUp.admit(bytes: 100, estimate: 1_000_000, pacerQueueDelay: 150_000, now: 0)
        #expect(!refused && taken, "none while the pacer holds over 150 ms")
        var clear = RetransmissionBudget()
        var onClearPath = 0
        for i in 0..<150 where clear.admit(bytes: 1_250, estimate: 1_000_000, pacerQueueDelay: 0, pathQueueDelay: 19.9, now: Int64(i) * 1_000) { onClearPath += 1 }
        #expect(onClearPath == 100, "the path holds no queue: the whole estimate, 125 kB")
    }

    @Test func repairsHaveTheirOwnRateOnlyWhileThePathHoldsNoQueue() {
        #expect(SendPolicy.repairRate(estimate: 2_000_000, queueDelay: 19.9) == 2_000_000)
        #expect(SendPolicy.repairRate(estimate: 2_000_000, queueDelay: 20) == 0)
    }
}
