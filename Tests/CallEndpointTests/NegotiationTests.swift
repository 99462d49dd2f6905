import Foundation
import RTPTransport
import Testing
@testable import CallEndpoint

func description(port: Int, ssrc: UInt32, host: String, codecs: [CallSessionDescription.Codec]? = nil,
                 crypto: [CallSessionDescription.Crypto]? = nil) -> CallSessionDescription {
    let video = CallSessionDescription.Codec(name: "VP8", payloadType: 96, clockRate: 90_000, rtxPayloadType: 97,
                                             feedback: ["nack", "nack pli", "ccm fir", "transport-cc"])
    let opus = CallSessionDescription.Codec(name: "opus", payloadType: 111, clockRate: 48_000, channels: 2, feedback: ["transport-cc"],
                                            parameters: ["useinbandfec": "1"])
    let key = Data((0..<30).map { UInt8(truncatingIfNeeded: Int(ssrc) + $0) }).base64EncodedString()
    return CallSessionDescription(
        cname: "ep-\(ssrc)",
        media: [
            .init(kind: "video", codecs: codecs ?? [video], ssrc: ssrc, rtxSSRC: ssrc + 1,
                  headerExtensions: [.init(id: 3, uri: TransportSequenceNumber.uri), .init(id: 4, uri: AbsoluteSendTime.uri)], port: port),
            .init(kind: "audio", codecs: [opus], ssrc: ssrc + 2, rtxSSRC: nil, headerExtensions: [.init(id: 3, uri: TransportSequenceNumber.uri)], port: port + 2),
        ],
        candidates: [.init(host: host)],
        crypto: crypto ?? [.init(profile: SRTPProfile.aes128CmSha1_80.rawValue, key: key)])
}

@Suite struct ConnectOptionsTests {
    @Test func autoAndManualParametersAreMutuallyExclusive() throws {
        let auto = try ConnectOptions(token: "t") { $0.roomName = "lab"; $0.videoEncodingMode = .auto }
        #expect(auto.effectiveEncodingMode == .auto && auto.srtpEnabled)
        let manual = try ConnectOptions(token: "t") {
            $0.roomName = "lab"
            $0.videoEncodingMode = .manual
            $0.encodingParameters = EncodingParameters(maxVideoBitrate: 800_000)
        }
        #expect(manual.effectiveEncodingMode == .manual)
        #expect(try ConnectOptions(token: "t") { $0.roomName = "r"; $0.preferredVideoCodecs = [.vp8] }.effectiveEncodingMode == .manual)
        let cases: [(String, (inout ConnectOptions) -> Void)] = [
            ("cannot take EncodingParameters", { $0.roomName = "r"; $0.videoEncodingMode = .auto; $0.encodingParameters = EncodingParameters(maxVideoBitrate: 1_000_000) }),
            ("cannot take preferred codecs", { $0.roomName = "r"; $0.videoEncodingMode = .auto; $0.preferredAudioCodecs = [.opus] }),
            ("no room name", { _ in }),
            ("maxVideoBitrate", { $0.roomName = "r"; $0.encodingParameters = EncodingParameters(maxVideoBitrate: 10) }),
        ]
        for (message, configure) in cases {
            do {
                _ = try ConnectOptions(token: "t", configure)
                Issue.record("accepted: \(message)")
            } catch {
                #expect(error.description.contains(message), "\(error)")
            }
        }
        #expect(throws: ConfigurationError.self) { try ConnectOptions(token: "") { $0.roomName = "r" } }
    }
}

@Suite struct NegotiationTests {
    @Test func offerAnswerRoundTripsThroughJSONAndAgrees() throws {
        let offer = description(port: 40000, ssrc: 1000, host: "10.0.0.1")
        let decoded = try CallSessionDescription(json: try offer.json())
        #expect(decoded == offer)
        let local = description(port: 50000, ssrc: 2000, host: "10.0.0.2")
        let answer = try OfferAnswer.answer(decoded, local: local)
        #expect(answer.media.map { $0.codecs.map(\.payloadType) } == [[96], [111]])
        let offerer = try OfferAnswer.negotiate(local: offer, remote: answer)
        let answerer = try OfferAnswer.negotiate(local: answer, remote: offer)
        #expect(offerer.remoteHost == "10.0.0.2" && answerer.remoteHost == "10.0.0.1")
        #expect(offerer.streams.map(\.remotePort) == [50000, 50002] && answerer.streams.map(\.remotePort) == [40000, 40002])
        #expect(offerer.streams[0].remoteSSRC == 2000 && answerer.streams[0].remoteSSRC == 1000)
        #expect(offerer.streams[0].transportSequenceExtensionID == 3)
        // Each side sends with its own key and receives with the other's.
        let o = try #require(offerer.srtp), a = try #require(answerer.srtp)
        #expect(o.sendKey == a.receiveKey && o.receiveKey == a.sendKey && o.sendKey != o.receiveKey)
    }

    @Test func answerKeepsOnlyWhatBothSupport() throws {
        var local = description(port: 50000, ssrc: 2000, host: "h")
        local.media[0].codecs[0].feedback = ["nack", "nack pli"]
        local.media[0].codecs[0].rtxPayloadType = nil
        local.media[0].headerExtensions = [.init(id: 9, uri: TransportSequenceNumber.uri)]
        let offer = description(port: 40000, ssrc: 1000, host: "o",
                                codecs: [.init(name: "H264", payloadType: 102, clockRate: 90_000), .init(name: "VP8", payloadType: 100, clockRate: 90_000, rtxPayloadType: 101, feedback: ["nack", "goog-remb"])])
        let answer = try OfferAnswer.answer(offer, local: local)
        let video = try #require(answer.media("video"))
        #expect(video.codecs == [.init(name: "VP8", payloadType: 100, clockRate: 90_000, rtxPayloadType: nil, feedback: ["nack"])])
        // Both know transport-cc (under the offer's id, RFC 8285 §6); abs-send-time only the offerer.
        #expect(video.headerExtensions == [.init(id: 3, uri: TransportSequenceNumber.uri)])
    }

    @Test func failuresSayWhy() throws {
        let local = description(port: 50000, ssrc: 2000, host: "h")
        let h264Only = description(port: 40000, ssrc: 1000, host: "o", codecs: [.init(name: "H264", payloadType: 102, clockRate: 90_000)])
        #expect(throws: NegotiationError("video: no common codec (offered H264, supported VP8)")) { try OfferAnswer.answer(h264Only, local: local) }
        let plain = description(port: 40000, ssrc: 1000, host: "o", crypto: [])
        #expect(throws: NegotiationError.self) { try OfferAnswer.answer(plain, local: local) }
        do {
            _ = try OfferAnswer.negotiate(local: local, remote: plain)
            Issue.record("downgraded to plain RTP")
        } catch {
            #expect(error.description.contains("refusing to fall back"))
        }
        let gcmOnly = description(port: 40000, ssrc: 1000, host: "o", crypto: [.init(profile: SRTPProfile.aeadAes128Gcm.rawValue, key: Data(count: 28).base64EncodedString())])
        #expect(throws: NegotiationError.self) { try OfferAnswer.answer(gcmOnly, local: local) }
    }

    @Test func malformedDescriptionsAreRejected() throws {
        var bad = description(port: 40000, ssrc: 1000, host: "o")
        bad.media[0].codecs[0].payloadType = 72
        #expect(throws: NegotiationError.self) { try CallSessionDescription(json: try bad.json()) }
        bad = description(port: 40000, ssrc: 1000, host: "o")
        bad.candidates = []
        #expect(throws: NegotiationError.self) { try CallSessionDescription(json: try bad.json()) }
        bad = description(port: 40000, ssrc: 1000, host: "o", crypto: [.init(profile: "AES_CM_128_HMAC_SHA1_80", key: "c2hvcnQ=")])
        #expect(throws: NegotiationError.self) { try CallSessionDescription(json: try bad.json()) }
        #expect(throws: NegotiationError.self) { try CallSessionDescription(json: Data("{\"version\":2}".utf8)) }
        #expect(throws: NegotiationError.self) { try CallSessionDescription(json: Data("not json".utf8)) }
    }
}
