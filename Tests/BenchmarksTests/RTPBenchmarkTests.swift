import Testing
@testable import Benchmarks
import CallEndpoint

@Suite struct RTPBenchmarkTests {
    @Test func everyPathDeliversEveryPacket() throws {
        let rows = try RTPBenchmark(packets: 3000).run()
        #expect(rows.map(\.name) == ["plain RTP", "AES_CM_128_HMAC_SHA1_80", "AEAD_AES_128_GCM"])
        for row in rows {
            #expect(row.received == 3000, "\(row.name) delivered \(row.received)")
            #expect(row.packetsPerSecond > 0 && row.cpuMicrosecondsPerPacket > 0)
        }
        #expect(RTPBenchmark.format(rows).contains("ratio to plain"))
    }
}
