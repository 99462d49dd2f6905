import Foundation
import Testing
import TestSupport
@testable import RTPTransport

@Suite struct JSEPDescriptionTests {
    @Test func aBrowserOfferIsRead() throws {
        let offer = try JSEPDescription(type: .offer, sdp: browserShapedOffer)
        #expect(offer.media.map(\.kind) == ["audio", "video"] && offer.bundle == ["0", "1"])
        #expect(offer.transport.ufrag == "Xq7v" && offer.transport.setup == .actpass && offer.transport.fingerprint.bytes.count == 32)
        let audio = offer.media[0], video = offer.media[1]
        #expect(audio.codecs.map(\.name) == ["opus", "G722", "PCMU", "PCMA", "CN", "telephone-event", "telephone-event"], "RED for Opus attaches to it")
        #expect(audio.codecs[0].redPayloadType == 63)
        #expect(audio.codecs[0].parameters == "minptime=10;useinbandfec=1" && audio.codecs[0].channels == 2 && audio.codecs[0].feedback == ["transport-cc"])
        #expect(audio.ssrc == 1111 && audio.cname == "browsercname" && audio.msid == "stream1 audiotrack1")
        #expect(video.codecs.map(\.name) == ["VP8", "VP9", "AV1"], "RTX entries attach to their codec")
        #expect(video.codecs[0].rtxPayloadType == 97 && video.codecs[1].rtxPayloadType == 99 && video.codecs[2].rtxPayloadType == 46)
        #expect(video.codecs[0].feedback == ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
        #expect(video.ssrc == 2222 && video.rtxSSRC == 3333)
        #expect(video.extensionID(TransportSequenceNumber.uri) == 3 && video.extensionID("urn:ietf:params:rtp-hdrext:sdes:mid") == 4)
        #expect(video.direction == .sendrecv && video.rtcpMux && video.rtcpReducedSize)
    }

    @Test func whatCallendWritesReadsBackTheSame() throws {
        var video = JSEPDescription.Media(kind: "video", mid: "1")
        video.codecs = [.init(payloadType: 96, name: "VP8", clockRate: 90_000, feedback: ["nack", "nack pli", "ccm fir", "transport-cc"], rtxPayloadType: 97)]
        video.extensions = [.init(id: 3, uri: TransportSequenceNumber.uri)]
        video.ssrc = 5
        video.rtxSSRC = 6
        video.cname = "cn"
        video.msid = "s v"
        video.direction = .sendonly
        video.formats = ["96", "97"]
        var audio = JSEPDescription.Media(kind: "audio", mid: "0")
        audio.codecs = [.init(payloadType: 111, name: "opus", clockRate: 48_000, channels: 2, parameters: "minptime=10;useinbandfec=1", feedback: ["transport-cc"])]
        audio.ssrc = 7
        audio.cname = "cn"
        audio.formats = ["111"]
        var rejected = JSEPDescription.Media(kind: "application", mid: "2")
        rejected.port = 0
        rejected.proto = "UDP/DTLS/SCTP"
        rejected.formats = ["webrtc-datachannel"]
        (rejected.direction, rejected.rtcpMux, rejected.rtcpReducedSize) = (.inactive, false, false)
        var transport = JSEPDescription.Transport(ufrag: "abcd", password: String(repeating: "p", count: 24),
                                                  fingerprint: DTLSFingerprint(algorithm: "sha-256", bytes: Array(0..<32)), setup: .active)
        transport.candidates = ["candidate:1 1 UDP 2130706431 10.0.0.1 5000 typ host"]
        transport.endOfCandidates = true
        let written = JSEPDescription(type: .answer, sessionID: 42, media: [audio, video, rejected], transport: transport)
        #expect(written.bundle == ["0", "1"], "a rejected section is not bundled")
        let read = try JSEPDescription(type: .answer, sdp: written.sdp)
        for (r, w) in zip(read.media, written.media) { #expect(r == w, "\(r)\n\(w)") }
        #expect(read.transport == written.transport && read.sessionID == 42)
        #expect(written.sdp.contains("m=application 0 UDP/DTLS/SCTP webrtc-datachannel\r\n"))
        #expect(written.sdp.hasSuffix("\r\n") && !written.sdp.contains("\n\n"))
    }

    /// Each case: what is replaced (with what) and the words the error must contain.
    @Test(arguments: [
        ("a=group:BUNDLE 0 1\r\n", "", "BUNDLE"),
        ("a=ice-ufrag:Xq7v\r\n", "", "ice-ufrag"),
        ("a=fingerprint:", "a=x-fingerprint:", "fingerprint"),
        ("a=rtcp-mux\r\n", "", "rtcp-mux"),
        ("a=setup:actpass", "a=setup:sideways", "setup"),
        ("v=0", "hello", "x=value"),
        ("m=audio 9 UDP", "m=audio nine UDP", "m= line"),
        ("abcdefghijklmnopqrstuvwx", "short", "length"),
        ("a=rtpmap:96 VP8/90000", "a=rtpmap:96 VP8", "clock rate"),
    ])
    func badOffersAreRefusedWithTheReason(old: String, new: String, reason: String) {
        do {
            _ = try JSEPDescription(type: .offer, sdp: browserShapedOffer.replacingOccurrences(of: old, with: new))
            Issue.record("'\(old)' -> '\(new)': accepted")
        } catch {
            #expect(error.description.contains(reason), "'\(old)' -> '\(new)': \(error)")
        }
    }

    @Test func anAnswerMustNotSayActpass() {
        #expect(throws: ParseError.self) { try JSEPDescription(type: .answer, sdp: browserShapedOffer) }
    }

    /// Every truncation of a valid description, and every line cut short, either parses or
    /// throws; none traps (a=ssrc: with nothing after it once indexed an empty split).
    @Test func everyTruncationIsHandled() {
        let bytes = Array(browserShapedOffer.utf8)
        for length in 0..<bytes.count {
            _ = try? JSEPDescription(type: .offer, sdp: String(decoding: bytes.prefix(length), as: UTF8.self))
        }
        let lines = browserShapedOffer.components(separatedBy: "\r\n")
        for (i, line) in lines.enumerated() {
            for cut in [2, line.count / 2, line.count - 1] where cut >= 0 && cut < line.count {
                var edited = lines
                edited[i] = String(line.prefix(cut))
                _ = try? JSEPDescription(type: .offer, sdp: edited.joined(separator: "\r\n"))
                edited[i] = String(line.prefix(cut)) + "/"
                _ = try? JSEPDescription(type: .offer, sdp: edited.joined(separator: "\r\n"))
            }
        }
    }
}
