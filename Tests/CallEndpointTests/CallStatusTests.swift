import MediaCore
import Testing
@testable import CallEndpoint

struct CallStatusTests {
    /// Each stats line says the longest freeze that ended in its second (what a loss bench
    /// judges a call by), not the longest since the start, and nothing when none ended.
    @Test func aStatsLineCarriesTheLongestFreezeOfItsSecond() {
        var sent = SenderStatistics()
        var received = ReceiverSummary()
        sent.elapsed = .seconds(1)
        let first = (sent, received)
        sent.elapsed = .seconds(2)
        received.freezes = 2
        received.recentFreezes = [.milliseconds(900), .milliseconds(320), .milliseconds(410)]
        let second = CallStatus.between(first, (sent, received), participant: "a")
        #expect(second.freezes == 2 && second.longestFreezeMs == 410, "the two of this second, not the 900 ms one before")
        sent.elapsed = .seconds(3)
        let third = CallStatus.between((first.0, received), (sent, received), participant: "a")
        #expect(third.longestFreezeMs == nil)
        #expect(third.json.contains("\"freezes\":2") && !third.json.contains("longestFreezeMs"))
    }

    /// Each line carries the interval's latency budget: the means of the hops measured in it, the
    /// sender's in what we send and the receiver's in what we receive, with half the round trip
    /// as the network's; nothing where nothing was measured.
    @Test func aStatsLineCarriesTheIntervalsLatencyBudget() {
        var sent = SenderStatistics(), received = ReceiverSummary()
        sent.elapsed = .seconds(1)
        sent.videoBudget.add(.encode, .milliseconds(30))  // the first second's: not in the next line
        let first = (sent, received)
        sent.elapsed = .seconds(2)
        sent.roundTripTime = .milliseconds(8)
        for ms in [4, 6] { sent.videoBudget.add(.encode, .milliseconds(ms)) }
        sent.videoBudget.add(.capture, .milliseconds(3))
        sent.audioBudget.add(.capture, .milliseconds(10))
        received.videoBudget.add(.decode, .milliseconds(2))
        received.videoBudget.add(.jitterBuffer, .milliseconds(12))
        let line = CallStatus.between(first, (sent, received), participant: "a")
        #expect(line.sentBudgetMs == .init(video: ["capture": 3, "encode": 5], audio: ["capture": 10]))
        #expect(line.receivedBudgetMs == .init(video: ["network": 4, "jitterBuffer": 12, "decode": 2], audio: [:]), "no audio decoded: no network hop for it")
        #expect(line.receivedBudgetMs?.total(video: true) == 18)
        #expect(line.json.contains(#""sentBudgetMs":{"audio":{"capture":10},"video":{"capture":3,"encode":5}}"#), "\(line.json)")
        sent.elapsed = .seconds(3)
        let quiet = CallStatus.between((sent, received), (sent, received), participant: "a")
        #expect(quiet.sentBudgetMs == nil && quiet.receivedBudgetMs == nil && !quiet.json.contains("Budget"))
    }
}
