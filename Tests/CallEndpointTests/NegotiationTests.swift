import Foundation
import RTPTransport
import Testing
import TestSupport
@testable import CallEndpoint

/// A transport description with made-up credentials and fingerprint.
func transport(_ tag: UInt8, setup: JSEPDescription.Setup = .actpass) -> JSEPDescription.Transport {
    .init(ufrag: "uf\(tag)x", password: String(repeating: "p", count: 22) + "\(tag)", fingerprint: DTLSFingerprint(algorithm: "sha-256", bytes: [UInt8](repeating: tag, count: 32)), setup: setup)
}

@Suite struct ConnectOptionsTests {
    @Test func autoAndManualParametersAreMutuallyExclusive() throws {
        let auto = try ConnectOptions(token: "t") { $0.roomName = "lab"; $0.videoEncodingMode = .auto }
        #expect(auto.effectiveEncodingMode == .auto && auto.iceTransportPolicy == .all && auto.iceServers.isEmpty)
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
    @Test func callendOffersAndAnswersItself() throws {
        let alice = LocalMedia(sendsVideo: true, sendsAudio: true), bob = LocalMedia(sendsVideo: true, sendsAudio: true)
        let offer = OfferAnswer.offer(alice, transport: transport(1))
        // Through the wire format and back, as signaling carries it.
        let received = try JSEPDescription(type: .offer, sdp: offer.sdp)
        #expect(received.bundle == ["0", "1"] && received.media.map(\.kind) == ["audio", "video"])
        let (answer, bobCall) = try OfferAnswer.answer(received, local: bob, transport: transport(2))
        #expect(answer.transport.setup == .active && bobCall.dtlsRole == .client)
        let aliceCall = try OfferAnswer.negotiate(offer: offer, answer: try JSEPDescription(type: .answer, sdp: answer.sdp), local: alice)
        #expect(aliceCall.dtlsRole == .server && aliceCall.remoteTransport.fingerprint == transport(2).fingerprint)
        for call in [aliceCall, bobCall] {
            #expect(call.streams.map(\.kind) == [.audio, .video] && call.streams.allSatisfy { $0.sends && $0.receives })
            #expect(call.stream(.video)?.codec.payloadType == 96 && call.stream(.video)?.codec.rtxPayloadType == 97)
            #expect(call.stream(.video)?.codec.feedback == ["nack", "nack pli", "ccm fir", "transport-cc"])
            #expect(call.stream(.video)?.transportSequenceExtensionID == 3 && call.stream(.audio)?.codec.payloadType == 111)
            #expect(call.stream(.audio)?.codec.redPayloadType == 63, "RED for Opus both ways")
            let video = try #require(call.stream(.video)?.codec)
            #expect(video.redPayloadType == 98 && video.ulpfecPayloadType == 100 && video.redRTXPayloadType == 99, "ULPFEC in RED for VP8 both ways")
        }
        #expect(offer.sdp.contains("m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99 100\r\n") && offer.sdp.contains("a=rtpmap:100 ulpfec/90000\r\n"),
                "VP8 first, then RED with its RTX and ULPFEC, as libwebrtc writes them")
        #expect(offer.sdp.contains("m=audio 9 UDP/TLS/RTP/SAVPF 63 111\r\n") && offer.sdp.contains("a=fmtp:63 111/111\r\n"),
                "RED listed first, as libwebrtc needs to send it")
        #expect(aliceCall.stream(.video)?.remoteSSRC == bob.videoSSRC && bobCall.stream(.video)?.remoteSSRC == alice.videoSSRC)
        #expect(bobCall.stream(.video)?.localRTXSSRC == bob.rtxSSRC)
    }

    /// A WHIP publisher offers sendonly (RFC 9725 §4.2); a side that takes no media answers an
    /// offer that sends with sendonly too, and one that offers recvonly (a WHEP player) gets sendonly.
    @Test func aSideThatTakesNoMediaOffersAndAnswersSendOnly() throws {
        var publisher = LocalMedia(sendsVideo: true, sendsAudio: true)
        publisher.receives = false
        let offer = try JSEPDescription(type: .offer, sdp: OfferAnswer.offer(publisher, transport: transport(1)).sdp)
        #expect(offer.media.map(\.direction) == [.sendonly, .sendonly])
        let server = LocalMedia(sendsVideo: false, sendsAudio: false)
        let (answer, serverCall) = try OfferAnswer.answer(offer, local: server, transport: transport(2))
        #expect(answer.media.map(\.direction) == [.recvonly, .recvonly] && serverCall.streams.allSatisfy { !$0.sends && $0.receives })
        let publisherCall = try OfferAnswer.negotiate(offer: OfferAnswer.offer(publisher, transport: transport(1)), answer: answer, local: publisher)
        #expect(publisherCall.streams.allSatisfy { $0.sends && !$0.receives })
        var player = LocalMedia(sendsVideo: false, sendsAudio: false)
        player.receives = true
        let viewerOffer = OfferAnswer.offer(player, transport: transport(3))
        let (toViewer, _) = try OfferAnswer.answer(viewerOffer, local: publisher, transport: transport(4))
        #expect(toViewer.media.map(\.direction) == [.sendonly, .sendonly])
    }

    /// A browser's offer: the answer takes its VP8 and Opus under its payload types, only the
    /// feedback and extension callend knows, and declines what it does not speak.
    @Test func aBrowserOfferIsAnsweredInItsOwnTerms() throws {
        var offerText = browserShapedOffer + "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:2\r\n"
        offerText = offerText.replacingOccurrences(of: "a=group:BUNDLE 0 1", with: "a=group:BUNDLE 0 1 2")
        let offer = try JSEPDescription(type: .offer, sdp: offerText)
        let (answer, call) = try OfferAnswer.answer(offer, local: LocalMedia(sendsVideo: true, sendsAudio: false), transport: transport(3))
        #expect(answer.media.map(\.mid) == ["0", "1", "2"] && answer.media[2].isRejected && answer.bundle == ["0", "1"])
        let audio = try #require(call.stream(.audio)), video = try #require(call.stream(.video))
        #expect(audio.codec.payloadType == 111 && audio.codec.feedback == ["transport-cc"] && !audio.sends && audio.receives)
        #expect(video.codec.payloadType == 96 && video.codec.rtxPayloadType == 97 && video.sends)
        #expect(video.codec.feedback == ["transport-cc", "ccm fir", "nack", "nack pli"], "goog-remb left out")
        #expect(answer.media[1].extensions == [.init(id: 3, uri: TransportSequenceNumber.uri), .init(id: 4, uri: "urn:ietf:params:rtp-hdrext:sdes:mid")],
                "the offer's IDs, only transport-cc and mid")
        #expect(call.stream(.video)?.midExtensionID == 4 && call.stream(.video)?.mid == "1")
        #expect(answer.media[0].direction == .recvonly && answer.media[1].direction == .sendrecv)
        // The answer reads back as a browser would read it.
        let back = try JSEPDescription(type: .answer, sdp: answer.sdp)
        #expect(back.media.map(\.port) == [9, 9, 0] && back.transport.setup == .active)
    }

    /// What a real Chromium offers (captured, not written by hand): every codec it has, a data
    /// channel, a dozen header extensions. callend answers VP8 and Opus with RTX, transport-cc and
    /// mid, declines the data channel, and knows Chromium's SSRCs before the first packet.
    @Test func answersWhatChromiumOffers() throws {
        let offer = try JSEPDescription(type: .offer, sdp: chromium156Offer)
        #expect(offer.media.map(\.kind) == ["audio", "video", "application"])
        let (answer, call) = try OfferAnswer.answer(offer, local: LocalMedia(sendsVideo: true, sendsAudio: true), transport: transport(7))
        #expect(answer.media.map(\.isRejected) == [false, false, true] && answer.bundle == ["0", "1"])
        let audio = try #require(call.stream(.audio)), video = try #require(call.stream(.video))
        #expect(audio.codec.name == "opus" && audio.codec.payloadType == 111 && audio.sends && audio.receives)
        #expect(video.codec.name == "VP8" && video.codec.payloadType == 96 && video.codec.rtxPayloadType == 97)
        #expect(Set(video.codec.feedback) == ["transport-cc", "ccm fir", "nack", "nack pli"])
        #expect(video.transportSequenceExtensionID == 3 && video.midExtensionID == 4 && audio.transportSequenceExtensionID == 3)
        #expect(video.remoteSSRC == 2855068886 && audio.remoteSSRC != nil)
        #expect(answer.media[1].codecs.count == 1, "one codec per section: the browser sends only what callend decodes")
        #expect(audio.codec.redPayloadType == 63, "Chromium's red/48000/2 for Opus is taken")
        #expect(video.codec.redPayloadType == 118 && video.codec.ulpfecPayloadType == 120 && video.codec.redRTXPayloadType == 119,
                "Chromium's red/90000 (RTX 119) and ulpfec/90000 for video are taken")
        #expect(answer.sdp.contains("a=rtpmap:118 red/90000\r\na=rtpmap:119 rtx/90000\r\na=fmtp:119 apt=118\r\na=rtpmap:120 ulpfec/90000\r\n"))
        #expect(answer.sdp.contains("m=audio 9 UDP/TLS/RTP/SAVPF 63 111\r\n") && answer.sdp.contains("a=rtpmap:63 red/48000/2\r\n"))
        let back = try JSEPDescription(type: .answer, sdp: answer.sdp)
        #expect(back.media.map(\.port) == [9, 9, 0] && back.transport.setup == .active)
    }

    /// With a data track, the same Chromium offer's data channel is taken (RFC 8841): the answer
    /// keeps its mid with a=sctp-port and a=max-message-size, bundled with the media.
    @Test func aDataTrackTakesChromiumsDataChannel() throws {
        let offer = try JSEPDescription(type: .offer, sdp: chromium156Offer)
        let offered = try #require(offer.media.last)
        #expect(offered.isDataChannel && offered.sctpPort == 5000 && offered.maxMessageSize == 262_144)
        var local = LocalMedia(sendsVideo: true, sendsAudio: true)
        local.dataChannels = true
        let (answer, call) = try OfferAnswer.answer(offer, local: local, transport: transport(7))
        #expect(answer.media.map(\.isRejected) == [false, false, false] && answer.bundle == ["0", "1", "2"])
        #expect(call.data == NegotiatedCall.DataAgreement(remotePort: 5000, maxMessageSize: 262_144))
        #expect(answer.sdp.contains("m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"))
        #expect(answer.sdp.contains("a=mid:2\r\na=sctp-port:5000\r\na=max-message-size:262144\r\n"))
        let back = try JSEPDescription(type: .answer, sdp: answer.sdp)
        #expect(back.media[2].isDataChannel && back.media[2].sctpPort == 5000)
    }

    /// callend to callend: the offer has a data channel section only with a data track, the
    /// answer takes it only with one too, and both sides end up agreeing.
    @Test func dataChannelsNeedADataTrackOnBothSides() throws {
        for (offers, answers) in [(true, true), (true, false), (false, true)] {
            var a = LocalMedia(sendsVideo: true, sendsAudio: true), b = LocalMedia(sendsVideo: true, sendsAudio: true)
            (a.dataChannels, b.dataChannels) = (offers, answers)
            let offer = OfferAnswer.offer(a, transport: transport(1))
            #expect(offer.media.contains { $0.isDataChannel } == offers)
            let (answer, answered) = try OfferAnswer.answer(try JSEPDescription(type: .offer, sdp: offer.sdp), local: b, transport: transport(2))
            let negotiated = try OfferAnswer.negotiate(offer: offer, answer: try JSEPDescription(type: .answer, sdp: answer.sdp), local: a)
            #expect((answered.data != nil) == (offers && answers) && (negotiated.data != nil) == (offers && answers), "offers \(offers), answers \(answers)")
            #expect(negotiated.streams.count == 2)
        }
        // An answer that brings a data channel the offer did not have is refused.
        var a = LocalMedia(sendsVideo: true, sendsAudio: true)
        let offer = OfferAnswer.offer(a, transport: transport(1))
        a.dataChannels = true
        var bogus = offer
        bogus.type = .answer
        bogus.transport = transport(2, setup: .active)
        bogus.media.append(.dataChannels(mid: "2"))
        #expect(throws: NegotiationError.self) { try OfferAnswer.negotiate(offer: offer, answer: bogus, local: a) }
    }

    /// A peer whose Opus has no RED (aiortc, GStreamer) gets plain Opus; RED whose fmtp names
    /// another codec, or several, is nobody's redundancy and stays a codec of its own.
    @Test func redIsTakenOnlyWhereBothOfferIt() throws {
        let plain = browserShapedOffer.replacingOccurrences(of: "a=rtpmap:63 red/48000/2\r\n", with: "")
        let (_, call) = try OfferAnswer.answer(try JSEPDescription(type: .offer, sdp: plain), local: LocalMedia(sendsVideo: true, sendsAudio: true),
                                               transport: transport(8))
        #expect(call.stream(.audio)?.codec.redPayloadType == nil)
        let ours = OfferAnswer.offer(LocalMedia(sendsVideo: true, sendsAudio: true), transport: transport(9))
        var answer = try JSEPDescription(type: .answer, sdp: OfferAnswer.answer(ours, local: LocalMedia(sendsVideo: true, sendsAudio: true), transport: transport(10)).0.sdp)
        answer.media[0].codecs[0].redPayloadType = nil
        let agreed = try OfferAnswer.negotiate(offer: ours, answer: try JSEPDescription(type: .answer, sdp: answer.sdp), local: LocalMedia(sendsVideo: true, sendsAudio: true))
        #expect(agreed.stream(.audio)?.codec.redPayloadType == nil, "an answer without RED: none")
        let mixed = try JSEPDescription(type: .offer, sdp: browserShapedOffer.replacingOccurrences(of: "a=fmtp:63 111/111", with: "a=fmtp:63 111/0"))
        #expect(mixed.media[0].codecs.first?.redPayloadType == nil && mixed.media[0].codecs.contains { $0.name == "red" })
    }

    /// Video FEC needs RED and ULPFEC both: a peer that offers or answers one alone (or neither,
    /// as aiortc) gets plain VP8, and nothing is written for it.
    @Test func videoFECIsTakenOnlyWithREDAndULPFECBoth() throws {
        let local = LocalMedia(sendsVideo: true, sendsAudio: true)
        for drop in ["a=rtpmap:120 ulpfec/90000\r\n", "a=rtpmap:118 red/90000\r\n"] {
            let offer = try JSEPDescription(type: .offer, sdp: chromium156Offer.replacingOccurrences(of: drop, with: ""))
            let (answer, call) = try OfferAnswer.answer(offer, local: local, transport: transport(11))
            let video = try #require(call.stream(.video)?.codec)
            #expect(video.redPayloadType == nil && video.ulpfecPayloadType == nil && video.redRTXPayloadType == nil, "without \(drop)")
            #expect(!answer.sdp.contains("ulpfec") && !answer.sdp.contains("red/90000"))
        }
        let ours = OfferAnswer.offer(local, transport: transport(12))
        var answer = try OfferAnswer.answer(ours, local: local, transport: transport(13)).0
        answer.media[1].codecs[0].ulpfecPayloadType = nil
        answer.media[1].codecs[0].redPayloadType = nil
        let agreed = try OfferAnswer.negotiate(offer: ours, answer: try JSEPDescription(type: .answer, sdp: answer.sdp), local: local)
        #expect(agreed.stream(.video)?.codec.ulpfecPayloadType == nil && agreed.stream(.video)?.codec.redPayloadType == nil,
                "an answer without video FEC (aiortc's): none")
    }

    @Test func failuresSayWhy() throws {
        let h264Only = browserShapedOffer.replacingOccurrences(of: "a=rtpmap:96 VP8/90000", with: "a=rtpmap:96 H264/90000")
            .replacingOccurrences(of: "a=rtpmap:111 opus/48000/2", with: "a=rtpmap:111 speex/48000")
        do {
            _ = try OfferAnswer.answer(try JSEPDescription(type: .offer, sdp: h264Only), local: LocalMedia(sendsVideo: true, sendsAudio: true), transport: transport(4))
            Issue.record("answered an offer without VP8 or Opus")
        } catch {
            #expect("\(error)".contains("Opus and VP8") && "\(error)".contains("H264"), "\(error)")
        }
        // An answer that picks something the offer never had.
        let alice = LocalMedia(sendsVideo: true, sendsAudio: true)
        let offer = OfferAnswer.offer(alice, transport: transport(5))
        var answer = offer
        answer.type = .answer
        answer.transport = transport(6, setup: .active)
        answer.media[1].codecs[0].payloadType = 100
        #expect(throws: NegotiationError.self) { try OfferAnswer.negotiate(offer: offer, answer: answer, local: alice) }
        answer = offer
        answer.transport = transport(6, setup: .actpass)
        #expect(throws: NegotiationError.self) { try OfferAnswer.negotiate(offer: offer, answer: answer, local: alice) }
        answer.transport.setup = .active
        for i in answer.media.indices { answer.media[i].port = 0 }
        #expect(throws: NegotiationError.self) { try OfferAnswer.negotiate(offer: offer, answer: answer, local: alice) }
    }
}
