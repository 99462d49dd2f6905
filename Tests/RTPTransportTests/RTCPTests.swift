import Testing
@testable import RTPTransport

@Suite struct RTCPTests {
    /// SR (RFC 3550 §6.4.1), one report block:
    /// 81 c8 00 0c | SSRC 0x11111111 | NTP 0xe1e2e3e4 0x00000001 | RTP ts 0x00001000 |
    /// packets 10 | octets 1000 | block: SSRC 0x22222222, fraction 0x40, lost -1 (0xffffff),
    /// highest 0x00010005, jitter 7, LSR 0x12345678, DLSR 0x00010000
    let senderReport: [UInt8] = [
        0x81, 0xc8, 0x00, 0x0c, 0x11, 0x11, 0x11, 0x11, 0xe1, 0xe2, 0xe3, 0xe4, 0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x03, 0xe8,
        0x22, 0x22, 0x22, 0x22, 0x40, 0xff, 0xff, 0xff, 0x00, 0x01, 0x00, 0x05, 0x00, 0x00, 0x00, 0x07,
        0x12, 0x34, 0x56, 0x78, 0x00, 0x01, 0x00, 0x00,
    ]
    /// SDES (§6.5): one chunk: SSRC 0x11111111 | CNAME (1), length 2, "ab" | end (0) + 3 bytes pad
    let sdesPacket: [UInt8] = [0x81, 0xca, 0x00, 0x03, 0x11, 0x11, 0x11, 0x11, 0x01, 0x02, 0x61, 0x62, 0x00, 0x00, 0x00, 0x00]
    /// BYE (§6.6): one source and reason "x": 81 cb 00 02 | SSRC | 01 78 00 00
    let bye: [UInt8] = [0x81, 0xcb, 0x00, 0x02, 0x11, 0x11, 0x11, 0x11, 0x01, 0x78, 0x00, 0x00]
    /// Generic NACK (RFC 4585 §6.2.1): FMT 1, PT 205, sender 1, media 2, PID 100 BLP 0x0005 (100, 101, 103)
    let nack: [UInt8] = [0x81, 0xcd, 0x00, 0x03, 0, 0, 0, 1, 0, 0, 0, 2, 0x00, 0x64, 0x00, 0x05]
    /// PLI (§6.3.1): FMT 1, PT 206, sender 1, media 2
    let pli: [UInt8] = [0x81, 0xce, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2]
    /// FIR (RFC 5104 §4.3.1): FMT 4, PT 206, sender 1, media 0, entry SSRC 2 seq 9
    let fir: [UInt8] = [0x84, 0xce, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0x09, 0, 0, 0]
    /// REMB: FMT 15, PT 206, sender 1, media 0, 'REMB', 1 SSRC, exp 2 mantissa 250000 = 1 Mbit/s, SSRC 2
    let remb: [UInt8] = [0x8f, 0xce, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 0, 0x52, 0x45, 0x4d, 0x42, 0x01, 0x0b, 0xd0, 0x90, 0, 0, 0, 2]

    @Test func senderReportFields() throws {
        guard case .senderReport(let sr) = try RTCPPacket.parseCompound(senderReport).first else { Issue.record("not an SR"); return }
        #expect(sr.ssrc == 0x1111_1111 && sr.ntpTimestamp == 0xe1e2_e3e4_0000_0001 && sr.rtpTimestamp == 0x1000)
        #expect(sr.packetCount == 10 && sr.octetCount == 1000)
        #expect(sr.reports == [ReceptionReport(ssrc: 0x2222_2222, fractionLost: 0x40, cumulativeLost: -1, extendedHighestSequence: 0x10005,
                                               jitter: 7, lastSenderReport: 0x1234_5678, delaySinceLastSenderReport: 0x10000)])
    }

    @Test func feedbackFields() throws {
        guard case .nack(let n) = try RTCPPacket.parseCompound(nack).first else { Issue.record("not a NACK"); return }
        #expect(n.senderSSRC == 1 && n.mediaSSRC == 2 && n.lostSequenceNumbers == [100, 101, 103])
        #expect(try RTCPPacket.parseCompound(pli) == [.pictureLossIndication(PictureLossIndication(senderSSRC: 1, mediaSSRC: 2))])
        #expect(try RTCPPacket.parseCompound(fir) == [.fullIntraRequest(FullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 2, sequenceNumber: 9)]))])
        #expect(try RTCPPacket.parseCompound(remb) == [.remb(ReceiverEstimatedMaximumBitrate(senderSSRC: 1, bitrate: 1_000_000, ssrcs: [2]))])
        #expect(try RTCPPacket.parseCompound(bye) == [.goodbye(Goodbye(sources: [0x1111_1111], reason: "x"))])
        guard case .sourceDescription(let sd) = try RTCPPacket.parseCompound(sdesPacket).first else { Issue.record("not SDES"); return }
        #expect(sd.cname == "ab")
    }

    @Test func compoundRoundTripsAndEveryPrefixFails() throws {
        let compound = senderReport + sdesPacket + nack + pli + fir + remb + bye
        let packets = try RTCPPacket.parseCompound(compound)
        #expect(packets.count == 7)
        #expect(RTCPPacket.serializeCompound(packets) == compound)
        for single in [senderReport, sdesPacket, bye, nack, pli, fir, remb] {
            #expect(RTCPPacket.serializeCompound(try RTCPPacket.parseCompound(single)) == single)
            for length in 0..<single.count {
                #expect(throws: ParseError.self, "prefix \(length) of \(single.prefix(2))") { try RTCPPacket.parseCompound(Array(single.prefix(length))) }
            }
        }
    }

    @Test func builtPacketsRoundTrip() throws {
        let packets: [RTCPPacket] = [
            .receiverReport(ReceiverReport(ssrc: 5, reports: [ReceptionReport(ssrc: 6, fractionLost: 3, cumulativeLost: 70000, extendedHighestSequence: 1 << 17, jitter: 90)])),
            .sourceDescription(SourceDescription(ssrc: 5, cname: "callend@roof")),
            .nack(GenericNACK(senderSSRC: 5, mediaSSRC: 6, lost: [65530, 65535, 0, 3, 40, 41])),
            .goodbye(Goodbye(sources: [5, 6], reason: "leaving")),
            .goodbye(Goodbye(sources: [5])),
        ]
        let bytes = RTCPPacket.serializeCompound(packets)
        #expect(bytes.count % 4 == 0)
        #expect(try RTCPPacket.parseCompound(bytes) == packets)
        guard case .nack(let n) = packets[2] else { return }
        #expect(n.lostSequenceNumbers == [65530, 65535, 0, 3, 40, 41], "wrap-aware grouping")
        #expect(n.entries.count == 2)
    }

    @Test func demultiplexesRTPAndRTCPOnOnePort() throws {
        #expect(isRTCP(senderReport) && isRTCP(pli) && isRTCP(nack))
        let rtp = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 1, ssrc: 1, marker: true).serialized()
        let opus = RTPPacket(payloadType: 111, sequenceNumber: 1, timestamp: 1, ssrc: 1, marker: true).serialized()
        #expect(!isRTCP(rtp) && !isRTCP(opus))
    }

    @Test func seededRandomBytesNeverTrap() {
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<20_000 {
            var bytes = randomBytes(Int.random(in: 0...80, using: &rng), &rng)
            if bytes.count >= 4 {
                bytes[0] = 0x80 | (bytes[0] & 0x1f)
                bytes[1] = UInt8.random(in: 200...206, using: &rng)
                bytes[2] = 0
                bytes[3] = UInt8((bytes.count / 4) - 1)
            }
            if let packets = try? RTCPPacket.parseCompound(bytes) {
                for case .transportFeedback(let fb) in packets { _ = try? fb.arrivals() }
            }
        }
    }
}

@Suite struct TransportCCTests {
    @Test func buildsParsesAndDecodesArrivals() throws {
        // 20 packets from seq 65530 (wrapping): a burst lost, one late (large delta), one early (negative).
        var arrivals: [Int64?] = []
        var t: Int64 = 1_000_000_000
        for i in 0..<20 {
            t += 5000
            switch i {
            case 3, 4, 5: arrivals.append(nil)
            case 10: arrivals.append(t + 100_000)
            case 11: arrivals.append(t - 2000)
            default: arrivals.append(t)
            }
        }
        let fb = try #require(TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, feedbackPacketCount: 7, base: 65530, arrivals: arrivals))
        let bytes = RTCPPacket.serializeCompound([.transportFeedback(fb)])
        #expect(bytes.count % 4 == 0)
        #expect(bytes[0] & 0x1f == 15 && bytes[1] == 205)
        let parsed = try RTCPPacket.parseCompound(bytes)
        #expect(parsed == [.transportFeedback(fb)])
        guard case .transportFeedback(let back) = parsed[0] else { return }
        let decoded = try back.arrivals()
        #expect(decoded.map(\.sequenceNumber) == (0..<20).map { UInt16(truncatingIfNeeded: 65530 + $0) })
        for (got, want) in zip(decoded.map(\.arrival), arrivals) {
            if let want { #expect(got.map { abs($0 - want) < 250 } == true, "\(String(describing: got)) vs \(want)") } else { #expect(got == nil) }
        }
        for length in 0..<bytes.count {
            #expect(throws: ParseError.self) { try RTCPPacket.parseCompound(Array(bytes.prefix(length))) }
        }
    }

    @Test func longRunsUseRunLengthChunks() throws {
        let arrivals: [Int64?] = (0..<100).map { Int64($0) * 1000 }
        let fb = try #require(TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, feedbackPacketCount: 0, base: 0, arrivals: arrivals))
        #expect(fb.chunks == [0x2000 | 100])
        #expect(try fb.arrivals().map(\.arrival) == arrivals)
        #expect(TransportCCFeedback(senderSSRC: 1, mediaSSRC: 2, feedbackPacketCount: 0, base: 0, arrivals: [0, 9_000_000]) == nil)
    }
}
