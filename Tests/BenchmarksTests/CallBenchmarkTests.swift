import Testing
@testable import Benchmarks

/// `bench call`'s latency budget: the stats lines' budgets averaged per endpoint (the first two
/// seconds left out), then per hop over the endpoints, the sender's hops then the receiver's.
struct CallBenchmarkTests {
    @Test func theBudgetIsTheMeanOfTheStatsLinesAfterTheStart() {
        let output = """
            {"seconds":0.9,"sentBudgetMs":{"video":{"encode":40}}}
            {"seconds":2.9,"sentBudgetMs":{"video":{"capture":2,"encode":4},"audio":{"capture":10}},"receivedBudgetMs":{"video":{"decode":1}}}
            {"seconds":3.9,"sentBudgetMs":{"video":{"capture":4,"encode":6}}}
            not json {
            a <- b: video 60 frames decoded
            """
        let sent = CallBenchmark.budget(in: output, key: "sentBudgetMs")
        #expect(sent == ["video": ["capture": 3, "encode": 5], "audio": ["capture": 10]], "the 0.9 s line is left out")
        #expect(CallBenchmark.budget(in: output, key: "receivedBudgetMs") == ["video": ["decode": 1]])
        #expect(CallBenchmark.budget(in: "", key: "sentBudgetMs").isEmpty)

        var a = CallBenchmark.Endpoint(cores: 0.2, maxRSSMiB: 50, framesDecoded: 300)
        var b = a
        a.sentBudget = ["video": ["capture": 2, "encode": 4, "pacing": 1]]
        b.sentBudget = ["video": ["capture": 4, "encode": 6, "pacing": 1]]
        a.receivedBudget = ["video": ["network": 0.5, "jitterBuffer": 10, "decode": 2, "playout": 0]]
        let line = CallBenchmark.budgetLine([a, b], stream: "video", measured: 26)
        #expect(line == "  video latency budget (mean ms per hop): capture 3.0, encode 5.0, pacing 1.0 | network 0.5, jitter buffer 10.0, decode 2.0, playout 0.0 = 21.5 ms (glass-to-glass p50 26 ms)", "\(line)")
        #expect(CallBenchmark.budgetLine([a, b], stream: "audio", measured: nil).contains("n/a (no budget"))
    }
}
