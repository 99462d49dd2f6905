import Foundation
import Testing
@testable import RTPTransport

@Suite struct SRTPTests {
    let rtp = RTPPacket(payloadType: 96, sequenceNumber: 1000, timestamp: 90000, ssrc: 0xcafe, marker: true, payload: Array(repeating: 0x42, count: 300)).serialized()
    let rtcp = RTCPPacket.serializeCompound([.receiverReport(ReceiverReport(ssrc: 0xcafe)), .pictureLossIndication(PictureLossIndication(senderSSRC: 0xcafe, mediaSSRC: 1))])

    @Test(arguments: SRTPProfile.allCases)
    func protectsAndUnprotects(profile: SRTPProfile) throws {
        let key = (0..<profile.keyMaterialLength).map { UInt8($0) }
        let sender = try SRTPSession(profile: profile, keyMaterial: key, direction: .outbound)
        let receiver = try SRTPSession(profile: profile, keyMaterial: key, direction: .inbound)
        let protected = try sender.protectRTP(rtp)
        #expect(protected.count == rtp.count + (profile == .aes128CmSha1_80 ? 10 : 16), "authentication tag appended")
        #expect(Array(protected[12..<50]) != Array(rtp[12..<50]), "payload encrypted")
        #expect(Array(protected.prefix(12)) == Array(rtp.prefix(12)), "header in clear")
        #expect(try receiver.unprotectRTP(protected) == rtp)
        // Replay protection: the same packet again is refused.
        #expect(throws: SRTPError.self) { try receiver.unprotectRTP(protected) }
        // Tampering is detected.
        var altered = try sender.protectRTP(RTPPacket(payloadType: 96, sequenceNumber: 1001, timestamp: 0, ssrc: 0xcafe, payload: [1, 2, 3]).serialized())
        altered[13] ^= 0x01
        #expect(throws: SRTPError.self) { try receiver.unprotectRTP(altered) }
        // Another key cannot read it.
        let stranger = try SRTPSession(profile: profile, keyMaterial: key.map { $0 ^ 0xff }, direction: .inbound)
        #expect(throws: SRTPError.self) { try stranger.unprotectRTP(try sender.protectRTP(RTPPacket(payloadType: 96, sequenceNumber: 1002, timestamp: 0, ssrc: 0xcafe, payload: [9]).serialized())) }
        // SRTCP.
        let protectedRTCP = try sender.protectRTCP(rtcp)
        #expect(try receiver.unprotectRTCP(protectedRTCP) == rtcp)
        #expect(throws: SRTPError.self) { try receiver.unprotectRTCP(protectedRTCP) }
    }

    @Test func badKeysAndShortPacketsAreErrors() throws {
        #expect(throws: SRTPError.self) { try SRTPSession(profile: .aes128CmSha1_80, keyMaterial: [1, 2, 3], direction: .outbound) }
        let session = try SRTPSession(profile: .aeadAes128Gcm, keyMaterial: Array(repeating: 7, count: 28), direction: .inbound)
        #expect(throws: SRTPError.self) { try session.unprotectRTP([0x80, 0x60]) }
        var rng = SeededGenerator(seed: 9)
        for _ in 0..<500 {
            var bytes = randomBytes(Int.random(in: 12...200, using: &rng), &rng)
            bytes[0] = 0x80
            _ = try? session.unprotectRTP(bytes)
        }
    }
}

@Suite struct SDPTests {
    @Test func writesWhatItReads() throws {
        let file = SessionDescriptionFile(connectionAddress: "127.0.0.1", streams: [
            StreamDescription(kind: .video, port: 5004, payloadType: 96, encodingName: "VP8", clockRate: 90000, feedback: ["nack", "nack pli"],
                              ssrc: 42, cname: "x", crypto: (.aes128CmSha1_80, Array(0..<30)), rtxPayloadType: 97),
            StreamDescription(kind: .audio, port: 5006, payloadType: 111, encodingName: "opus", clockRate: 48000, channels: 2, fmtp: "useinbandfec=1"),
        ])
        let text = file.text
        #expect(text.contains("m=video 5004 RTP/SAVP 96 97\r\n") && text.contains("a=rtpmap:97 rtx/90000") && text.contains("a=fmtp:97 apt=96"))
        #expect(text.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd"))
        var back = try SessionDescriptionFile(parsing: text)
        back.sessionName = file.sessionName
        #expect(back == file)
    }

    @Test func readsFFmpegsSDP() throws {
        // As written by ffmpeg 5.1 -f rtp ... -sdp_file (two outputs).
        let text = "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=No Name\nt=0 0\na=tool:libavformat 59.27.100\nm=video 5004 RTP/AVP 96\nc=IN IP4 127.0.0.1\nb=AS:600\na=rtpmap:96 VP8/90000\nm=audio 5006 RTP/AVP 111\nc=IN IP4 127.0.0.1\nb=AS:96\na=rtpmap:111 opus/48000/2\na=fmtp:111 sprop-stereo=1\n"
        let sdp = try SessionDescriptionFile(parsing: text)
        #expect(sdp.connectionAddress == "127.0.0.1")
        #expect(sdp.streams.map(\.port) == [5004, 5006] && sdp.streams.map(\.encodingName) == ["VP8", "opus"])
        #expect(sdp.streams[1].fmtp == "sprop-stereo=1" && !sdp.streams[0].rtcpMux)
    }

    @Test(arguments: [
        ("v=0\nm=video 5004 RTP/AVP 96\na=rtpmap:96 VP8/90000\n", "no c= line"),
        ("v=0\nc=IN IP4 127.0.0.1\n", "no audio or video"),
        ("v=0\nc=IN IP4 127.0.0.1\nm=video 0 RTP/AVP 96\n", "port"),
        ("v=0\nc=IN IP4 127.0.0.1\nm=video 5004 RTP/AVP 96\n", "no a=rtpmap"),
        ("v=0\nc=IN IP4 127.0.0.1\nm=audio 5004 RTP/AVP 0\n", "PCMU"),
        ("v=0\nc=IN IP4 127.0.0.1\nm=video 5004 RTP/SAVP 96\na=rtpmap:96 VP8/90000\na=crypto:1 F8_128_HMAC_SHA1_80 inline:AAAA\n", "supported suites"),
        ("v=0\nc=IN IP4 127.0.0.1\nm=video 5004 RTP/SAVP 96\na=rtpmap:96 VP8/90000\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAAA\n", "30 bytes"),
    ])
    func badSDPIsAnErrorThatSaysWhy(text: String, reason: String) {
        do {
            _ = try SessionDescriptionFile(parsing: text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.reason.contains(reason), "\(error)")
        }
    }
}

@Suite struct UDPPairTransportTests {
    /// Kinds keyed alike share one session per direction, so a receiver's video and audio RTCP
    /// (one SSRC) continue one SRTCP index instead of each starting at 0 under the same key.
    @Test func kindsKeyedAlikeShareOneSession() throws {
        let key = [UInt8](repeating: 7, count: 30), other = [UInt8](repeating: 9, count: 30)
        let alike = try UDPPairTransport(sockets: [:], keys: [.video: .init(profile: .aes128CmSha1_80, send: key, receive: key),
                                                               .audio: .init(profile: .aes128CmSha1_80, send: key, receive: key)])
        #expect(alike.outboundSession(.video) === alike.outboundSession(.audio))
        let apart = try UDPPairTransport(sockets: [:], keys: [.video: .init(profile: .aes128CmSha1_80, send: key, receive: key),
                                                               .audio: .init(profile: .aes128CmSha1_80, send: other, receive: other)])
        #expect(apart.outboundSession(.video) !== apart.outboundSession(.audio))
        // The one session numbers RTCP from one SSRC continuously across both kinds.
        let report = RTCPPacket.serializeCompound([.receiverReport(ReceiverReport(ssrc: 42))])
        let first = try #require(alike.outboundSession(.video)).protectRTCP(report)
        let second = try #require(alike.outboundSession(.audio)).protectRTCP(report)
        #expect(Array(first.suffix(14).prefix(4)) != Array(second.suffix(14).prefix(4)), "two packets, two SRTCP indices")
    }
}
