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
}
