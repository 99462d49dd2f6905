import Testing
@testable import Benchmarks

struct SharedLinkMetricsTests {
    /// Flows at constant rates (bit/s), sampled every 100 ms for `seconds`, with a queue of `backlog` bytes.
    func samples(_ rates: [(Double) -> Double], seconds: Double, backlog: (Double) -> Int = { _ in 0 }) -> [SharedLinkBenchmark.Sample] {
        var delivered = [Double](repeating: 0, count: rates.count)
        var out: [SharedLinkBenchmark.Sample] = []
        for step in 0...Int(seconds * 10) {
            let t = Double(step) / 10
            if step > 0 { for i in rates.indices { delivered[i] += rates[i](t) * 0.1 / 8 } }
            out.append(SharedLinkBenchmark.Sample(time: t, delivered: delivered.map { UInt64($0) }, backlogBytes: backlog(t), drops: 0, packets: UInt64(step * 10)))
        }
        return out
    }

    @Test func jainIsOneForEqualSharesAndOneOverNForOneTakingAll() {
        #expect(abs(SharedLinkMetrics.jain([1, 1, 1]) - 1) < 1e-12)
        #expect(abs(SharedLinkMetrics.jain([3, 0, 0]) - 1.0 / 3) < 1e-12)
        #expect(SharedLinkMetrics.jain([1.0, 1.1, 0.9]) > 0.99)
        #expect(SharedLinkMetrics.jain([]) == 0)
    }

    @Test func ratesQueueAndRecoveryComeFromTheCounters() {
        // Flow 0 at 1 Mbit/s, falling to 400 kbit/s from 20 s to 40 s (a TCP flow takes the rest), back after.
        let s = samples([{ t in t > 20 && t <= 40 ? 400_000 : 1_000_000 }, { t in t > 20 && t <= 40 ? 1_600_000 : 0 }], seconds: 60,
                        backlog: { t in t > 20 && t <= 40 ? 25_000 : 0 })
        let during = SharedLinkMetrics.rates(s, from: 20, to: 40)
        #expect(abs(during[0] - 400_000) < 2_000 && abs(during[1] - 1_600_000) < 2_000, "\(during)")
        // 25 kB at 2 Mbit/s is 100 ms of queue.
        #expect(abs(SharedLinkMetrics.queue(s, capacity: 2_000_000, from: 21, to: 39, quantile: 0.95) - 100) < 1e-9)
        #expect(SharedLinkMetrics.queue(s, capacity: 2_000_000, from: 45, to: 60, quantile: 0.95) == 0)
        // Back to 90 % of 1 Mbit/s over a one-second window: once 0.9 s of the window is at the full rate.
        let back = SharedLinkMetrics.secondsUntil(s, flow: 0, from: 40, target: 900_000)
        #expect(back != nil && back! > 0.8 && back! < 1.05, "\(String(describing: back))")
        #expect(SharedLinkMetrics.secondsUntil(s, flow: 1, from: 40, target: 900_000) == nil, "the TCP flow ended")
    }

    @Test func theFlowSamplersLinesParse() throws {
        let tbf = #"[{"kind":"tbf","handle":"8001:","bytes":1000,"packets":10,"drops":2,"overlimits":0,"requeues":0,"backlog":300,"qlen":1}]"#
        let parsed = try NamespaceTopology.flowCounters(line: "123 456 789 ;" + tbf, senders: 3)
        #expect(parsed.perSender == [123, 456, 789])
        #expect(parsed.tbf.delivered == 1000 && parsed.tbf.drops == 2 && parsed.tbf.backlog == 300)
        #expect(throws: (any Error).self) { try NamespaceTopology.flowCounters(line: "123 ;" + tbf, senders: 3) }
        #expect(throws: (any Error).self) { try NamespaceTopology.flowCounters(line: "no separator", senders: 1) }
    }
}
