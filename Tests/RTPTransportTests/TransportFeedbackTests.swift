import Testing
@testable import RTPTransport

@Suite struct TransportFeedbackTests {
    @Test func receiverFeedbackMapsBackToSentPackets() throws {
        var generator = TransportFeedbackGenerator(senderSSRC: 1, mediaSSRC: 2)
        var adapter = TransportFeedbackAdapter()
        // 20 packets from 65530 (wrapping), sent 5 ms apart, 1200 bytes; 65533 and 2 lost; 40 ms one-way.
        for i in 0..<20 {
            let sequence = UInt16(truncatingIfNeeded: 65530 + i)
            adapter.packetSent(sequence: sequence, size: 1200, atMicroseconds: Int64(i) * 5000)
            if sequence != 65533 && sequence != 2 {
                generator.received(sequence: sequence, arrivalMicroseconds: 1_000_000 + Int64(i) * 5000 + 40_000)
            }
        }
        let feedback = generator.makeFeedback()
        #expect(feedback.count == 1)
        let results = try adapter.results(for: feedback[0])
        #expect(results.count == 20)
        #expect(results.filter { $0.arrived == nil }.map(\.sequence) == [65533, 2])
        for r in results where r.arrived != nil {
            // Arrival minus send is the same for every packet (to the 250 us resolution).
            #expect(abs((r.arrived! - r.sent) - 1_040_000) < 250, "\(r)")
        }
        #expect(generator.makeFeedback().isEmpty, "nothing new")
        // The serialized feedback parses back to the same arrivals.
        let bytes = RTCPPacket.serializeCompound(feedback.map(RTCPPacket.transportFeedback))
        guard case .transportFeedback(let parsed)? = try RTCPPacket.parseCompound(bytes).first else { Issue.record("not transport-cc"); return }
        #expect(try adapter.results(for: parsed) == results)
    }

    @Test func aLongSilenceSplitsFeedbackAndCountsPackets() throws {
        var generator = TransportFeedbackGenerator(senderSSRC: 1, mediaSSRC: 2)
        generator.received(sequence: 10, arrivalMicroseconds: 0)
        generator.received(sequence: 11, arrivalMicroseconds: 10_000_000)  // 10 s later: over a 16-bit delta
        let feedback = generator.makeFeedback()
        #expect(feedback.count == 2)
        #expect(feedback.map(\.baseSequenceNumber) == [10, 11] && feedback.map(\.feedbackPacketCount) == [0, 1])
        generator.received(sequence: 12, arrivalMicroseconds: 10_001_000)
        generator.received(sequence: 11, arrivalMicroseconds: 10_002_000)  // already reported: ignored
        #expect(generator.makeFeedback().map(\.feedbackPacketCount) == [2])
    }

    /// What the path still holds: bytes sent after the newest packet feedback has covered.
    @Test func outstandingBytesAreWhatFeedbackHasNotCovered() throws {
        var generator = TransportFeedbackGenerator(senderSSRC: 1, mediaSSRC: 2)
        var adapter = TransportFeedbackAdapter()
        for i in 0..<10 { adapter.packetSent(sequence: UInt16(i), size: 1000, atMicroseconds: Int64(i) * 10_000) }
        #expect(adapter.outstandingBytes == 10_000)
        #expect(adapter.newestReported == nil)
        // The first six arrive (5 lost); the feedback covers up to 5: 6-9 are still out.
        for i in 0..<5 { generator.received(sequence: UInt16(i), arrivalMicroseconds: 500_000 + Int64(i) * 10_000) }
        generator.received(sequence: 6, arrivalMicroseconds: 560_000)
        let feedback = try #require(generator.makeFeedback().first)
        _ = try adapter.results(for: feedback, now: 600_000)
        #expect(adapter.outstandingBytes == 3_000, "7, 8 and 9")
        #expect(adapter.newestReported?.sent == 60_000 && adapter.newestReported?.at == 600_000)
        #expect(adapter.shortestFeedbackDelay == 540_000)
        adapter.packetSent(sequence: 10, size: 500, atMicroseconds: 100_000)
        #expect(adapter.outstandingBytes == 3_500)
    }
}
