import Foundation
import RTPTransport
import Testing
import TestSupport
@testable import CallEndpoint

/// H.264's a=fmtp (RFC 6184 §8.1) and its offer/answer rules (§8.2.2), against what Chromium 156
/// offers here.
@Suite struct H264NegotiationTests {
    @Test func formatParametersParseAndName() throws {
        let chromium = try #require(H264FormatParameters(fmtp: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"))
        #expect(chromium.packetizationMode == 1 && chromium.levelAsymmetryAllowed)
        #expect(chromium.profileLevelID.profile == .constrainedBaseline && chromium.profileLevelID.levelIDC == 0x1f)
        #expect(chromium.fmtp == "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", "written back as read")
        // Absent: RFC 6184's defaults, baseline level 1 in mode 0.
        let bare = try #require(H264FormatParameters(fmtp: nil))
        #expect(bare.profileLevelID.hex == "42000a" && bare.packetizationMode == 0 && !bare.levelAsymmetryAllowed)
        #expect(H264FormatParameters(fmtp: " profile-level-id = 4D001F ; sprop-parameter-sets=Z0LAHtkA,aM4=")?.profileLevelID.profile == .main)
        let profiles: [(String, H264ProfileLevelID.Profile?)] = [
            ("42e01f", .constrainedBaseline), ("42c01f", .constrainedBaseline), ("4d801f", .constrainedBaseline),
            ("58c01f", .constrainedBaseline), ("42001f", .baseline), ("4d001f", .main), ("64001f", .high),
            ("640c1f", .constrainedHigh), ("f4001f", nil), ("6e001f", nil),
        ]
        for (hex, profile) in profiles {
            #expect(H264ProfileLevelID(hex: hex)?.profile == profile, "\(hex)")
        }
        for bad in ["profile-level-id=42e0", "profile-level-id=zz001f", "profile-level-id=42e01f00", "packetization-mode=3", "packetization-mode=x"] {
            #expect(H264FormatParameters(fmtp: bad) == nil, "\(bad)")
        }
        // The answer keeps the profile; its level is the answerer's when both allow asymmetry,
        // else the lower of the two.
        #expect(chromium.answer(localLevel: 0x28).fmtp == "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e028")
        var symmetric = chromium
        symmetric.levelAsymmetryAllowed = false
        #expect(symmetric.answer(localLevel: 0x28).profileLevelID.levelIDC == 0x1f)
        #expect(symmetric.answer(localLevel: 0x0d).profileLevelID.levelIDC == 0x0d)
    }

    /// Chromium lists baseline 42001f first and constrained baseline 42e01f third: callend takes
    /// the constrained baseline payload type in packetization mode 1, with its RTX.
    @Test func answersChromiumsOfferWithConstrainedBaselineInModeOne() throws {
        let offer = try JSEPDescription(type: .offer, sdp: chromium156Offer)
        var local = LocalMedia(sendsVideo: true, sendsAudio: true)
        local.videoCodecs = [.h264, .vp8]
        let (answer, call) = try OfferAnswer.answer(offer, local: local, transport: transport(7))
        let video = try #require(call.stream(.video)?.codec)
        #expect(video.name == "H264" && video.payloadType == 108 && video.rtxPayloadType == 109)
        #expect(video.parameters == "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f")
        #expect(Set(video.feedback) == ["transport-cc", "ccm fir", "nack", "nack pli"])
        #expect(video.redPayloadType == 118 && video.ulpfecPayloadType == 120 && video.redRTXPayloadType == 119, "ULPFEC in RED, as for VP8")
        #expect(answer.sdp.contains("a=rtpmap:118 red/90000\r\n") && answer.sdp.contains("a=rtpmap:120 ulpfec/90000\r\n"))
        #expect(answer.sdp.contains("a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r\n"))
        // The answer reads back as the same choice, and the offerer's side agrees on it.
        let reread = try JSEPDescription(type: .answer, sdp: answer.sdp)
        #expect(reread.media[1].codecs.first?.payloadType == 108)

        // VP8 first: VP8, as before.
        local.videoCodecs = [.vp8, .h264]
        #expect(try OfferAnswer.answer(offer, local: local, transport: transport(8)).1.stream(.video)?.codec.name == "VP8")
        // Only mode 0 offered (or no constrained-baseline-compatible profile): declined, and a
        // VP8-only side declines H.264 as before.
        local.videoCodecs = [.h264]
        let modeZero = chromium156Offer.replacingOccurrences(of: "packetization-mode=1", with: "packetization-mode=0")
        let (declined, audioOnly) = try OfferAnswer.answer(try JSEPDescription(type: .offer, sdp: modeZero), local: local, transport: transport(9))
        #expect(declined.media[1].isRejected && audioOnly.stream(.video) == nil)
        let highOnly = chromium156Offer.replacingOccurrences(of: "profile-level-id=4", with: "profile-level-id=f4")
        #expect(try OfferAnswer.answer(try JSEPDescription(type: .offer, sdp: highOnly), local: local, transport: transport(9)).1.stream(.video) == nil)
    }

    /// callend's own offer with H.264 first: what Chromium would answer (its 42e01f payload type
    /// back, at its level) makes an H.264 call; an answer in mode 0 is refused.
    @Test func ourOfferAndAnAnswerMakeAnH264Call() throws {
        var local = LocalMedia(sendsVideo: true, sendsAudio: true)
        local.videoCodecs = [.h264, .vp8]
        let offer = OfferAnswer.offer(local, transport: transport(1))
        let sdp = offer.sdp
        #expect(sdp.contains("m=video 9 UDP/TLS/RTP/SAVPF 102 103 104 105 106 107 96 97 98 99 100\r\n"))
        #expect(sdp.contains("a=rtpmap:102 H264/90000\r\na=") && sdp.contains("a=fmtp:103 apt=102\r\n"))
        #expect(sdp.contains("a=fmtp:106 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f\r\n"))
        let parsed = try JSEPDescription(type: .offer, sdp: sdp)
        #expect(parsed.media[1].codecs.map(\.payloadType) == [102, 104, 106, 96])

        var peer = LocalMedia(sendsVideo: true, sendsAudio: true)
        peer.videoCodecs = [.h264]
        let (answer, peerCall) = try OfferAnswer.answer(parsed, local: peer, transport: transport(2))
        #expect(peerCall.stream(.video)?.codec.payloadType == 102)
        let call = try OfferAnswer.negotiate(offer: offer, answer: try JSEPDescription(type: .answer, sdp: answer.sdp), local: local)
        let video = try #require(call.stream(.video))
        #expect(video.codec.name == "H264" && video.codec.payloadType == 102 && video.codec.rtxPayloadType == 103 && video.sends && video.receives)
        #expect(video.codec.redPayloadType == 98 && video.codec.ulpfecPayloadType == 100 && video.codec.redRTXPayloadType == 99)
        // H.264 alone: its FEC's payload types after it, once.
        local.videoCodecs = [.h264]
        #expect(OfferAnswer.offer(local, transport: transport(3)).sdp.contains("m=video 9 UDP/TLS/RTP/SAVPF 102 103 104 105 106 107 98 99 100\r\n"))

        var modeZero = try JSEPDescription(type: .answer, sdp: answer.sdp)
        modeZero.media[1].codecs[0].parameters = "packetization-mode=0;profile-level-id=42e01f"
        #expect(throws: NegotiationError.self) { try OfferAnswer.negotiate(offer: offer, answer: modeZero, local: local) }
        #expect(video.receivedCodec == nil, "one codec answered: both sides send it")
    }

    /// An answer that lists several codecs, as Chromium 156 answers callend's H.264 offer (42001f
    /// first, then 42e01f and 4d001f): this side sends the answer's first, and the peer sends
    /// the offer's most preferred one it answered (RFC 3264 §6.1), which is what this side must
    /// receive. Seen in the browser stage: Chromium sent 102 while callend waited for 104.
    @Test func anAnswerOfSeveralCodecsIsSentItsFirstAndReceivedInTheOffersOrder() throws {
        var local = LocalMedia(sendsVideo: true, sendsAudio: true)
        local.videoCodecs = [.h264]
        let offer = OfferAnswer.offer(local, transport: transport(1))
        var answer = try JSEPDescription(type: .answer, sdp: offer.sdp.replacingOccurrences(of: "a=setup:actpass", with: "a=setup:active"))
        let offered = answer.media[1].codecs
        #expect(offered.map(\.payloadType) == [102, 104, 106])
        answer.media[1].codecs = [offered[1], offered[0], offered[2]]
        let video = try #require(try OfferAnswer.negotiate(offer: offer, answer: answer, local: local).stream(.video))
        #expect(video.codec.payloadType == 104 && video.codec.rtxPayloadType == 105, "sent: \(video.codec)")
        #expect(video.incomingCodec.payloadType == 102 && video.incomingCodec.rtxPayloadType == 103, "received: \(video.incomingCodec)")

        // VP8 first in the offer, the answer H.264 first: the peer sends VP8, this side H.264.
        local.videoCodecs = [.vp8, .h264]
        let both = OfferAnswer.offer(local, transport: transport(1))
        var mixed = try JSEPDescription(type: .answer, sdp: both.sdp.replacingOccurrences(of: "a=setup:actpass", with: "a=setup:active"))
        mixed.media[1].codecs = mixed.media[1].codecs.filter { $0.name == "H264" } + mixed.media[1].codecs.filter { $0.name == "VP8" }
        let call = try #require(try OfferAnswer.negotiate(offer: both, answer: mixed, local: local).stream(.video))
        #expect(call.codec.name == "H264" && call.incomingCodec.name == "VP8", "\(call)")
    }
}
