import Foundation
import MediaCore
@testable import RTPTransport
import Synchronization
import Testing
@testable import CallEndpoint

/// Two call media sessions in one process, wired to each other as signaling would: offer and
/// answer through SDP text, candidates trickled as they are found.
final class CallMediaPair: Sendable {
    let a: CallMedia, b: CallMedia
    let aCall: NegotiatedCall, bCall: NegotiatedCall
    /// Events of a's transport (on their way to b) and of b's.
    let toB: Wire, toA: Wire

    final class Wire: Sendable {
        let peer = Mutex<CallMedia?>(nil)
        let pending = Mutex<[String]>([])
        /// What the sending side's transport reported.
        let events = Mutex<[BundleTransport.Event]>([])
        func event(_ event: BundleTransport.Event) {
            events.withLock { $0.append(event) }
            switch event {
            case .localCandidate(let line, let ufrag):
                if let p = peer.withLock({ $0 }) { try? p.transport.addRemoteCandidate(line, ufrag: ufrag) } else { pending.withLock { $0.append(line) } }
            case .gatheringDone(let ufrag):
                peer.withLock { $0 }?.transport.remoteGatheringDone(ufrag: ufrag)
            default: break
            }
        }
    }

    /// `videoCodecs`: what a offers (in its order of preference), and b accepts unless
    /// `answererCodecs` says otherwise.
    init(certificateA: DTLSCertificate? = nil, videoCodecs: [VideoCodec] = [.vp8], answererCodecs: [VideoCodec]? = nil, width: Int = 320, height: Int = 240) throws {
        let (toB, toA) = (Wire(), Wire())
        (self.toB, self.toA) = (toB, toA)
        var ice = ICEAgent.Configuration(controlling: true)
        ice.localAddresses = ["127.0.0.1"]
        var media = try Call.Media.synthetic(width: width, height: height)
        media.videoCodecs = videoCodecs
        a = try CallMedia(media: media, ice: ice, certificate: try certificateA ?? DTLSCertificate()) { event in
            toB.event(event)
        }
        ice.controlling = false
        media.videoCodecs = answererCodecs ?? videoCodecs
        b = try CallMedia(media: media, ice: ice, certificate: try DTLSCertificate()) { event in
            toA.event(event)
        }
        let offer = a.offer()
        let (answer, bCall) = try b.answer(try JSEPDescription(type: .offer, sdp: offer.sdp))
        aCall = try a.accept(try JSEPDescription(type: .answer, sdp: answer.sdp), to: offer)
        self.bCall = bCall
        toB.peer.withLock { $0 = b }
        toA.peer.withLock { $0 = a }
        for c in toB.pending.withLock({ $0 }) { try b.transport.addRemoteCandidate(c) }
        for c in toA.pending.withLock({ $0 }) { try a.transport.addRemoteCandidate(c) }
    }
}

@Suite(.serialized) struct CallMediaTests {
    /// Offer/answer, ICE and DTLS-SRTP, then video and audio both ways on one bundled transport.
    @Test func mediaFlowsBothWaysAfterOfferAnswer() throws {
        let pair = try CallMediaPair()
        let resultB = Mutex<(SenderStatistics, ReceiverSummary)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let r = try? pair.b.run(pair.bCall, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(3))
            resultB.withLock { $0 = r.map { ($0.sent, $0.received) } }
            done.signal()
        }.start()
        let resultA = try pair.a.run(pair.aCall, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(3))
        #expect(done.wait(timeout: .now() + 40) == .success)
        let (sentB, receivedB) = try #require(resultB.withLock { $0 })
        for (sent, received, who) in [(resultA.sent, receivedB, "A -> B"), (sentB, resultA.received, "B -> A")] {
            #expect(Double(received.framesDecoded) >= 0.95 * Double(sent.videoFrames), "\(who): \(received.framesDecoded) of \(sent.videoFrames) frames")
            #expect(received.audioDecoded >= sent.audioPackets * 9 / 10, "\(who): \(received.audioDecoded) of \(sent.audioPackets) audio frames")
            #expect(received.decodeErrors == 0)
        }
        // RTCP flowed both ways too: each sender measured a round trip from the other's reports.
        #expect(resultA.sent.roundTripTime != nil && sentB.roundTripTime != nil)
        #expect(pair.a.transport.selectedPair?.local.address == "127.0.0.1" && pair.a.transport.profile != nil)
        pair.a.transport.close()
        pair.b.transport.close()
    }

    /// A speaker whose sound is heard 30 ms after it is handed over (a card with a deep buffer),
    /// playing nowhere.
    final class DeepSpeaker: AudioDevice {
        let captureChannels = 1
        func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws { throw ConfigurationError("a speaker only") }
        func stopCapture() {}
        func startPlayout() throws {}
        func play(_ samples: [Int16]) {}
        func stopPlayout() {}
        var route: (capture: String, playback: String) { ("none", "deep") }
        var playoutDelay: Duration { .milliseconds(30) }
    }

    /// Runs B's side of the call on a thread of its own for `seconds`, reading the stamps in A's
    /// picture and tone and playing into a `DeepSpeaker`; the function returned waits for it (at
    /// most 40 s) and gives what B received.
    func measuringB(of pair: CallMediaPair, seconds: Int) throws -> () -> ReceiverSummary? {
        let result = Mutex<ReceiverSummary?>(nil)
        let done = DispatchSemaphore(value: 0)
        var media = try Call.Media.synthetic(width: 320, height: 240)
        media.measuresLatency = true
        media.audioPlayout = DeepSpeaker()
        Thread { [media] in
            let r = try? pair.b.run(pair.bCall, media: media, duration: .seconds(seconds))
            result.withLock { $0 = r?.received }
            done.signal()
        }.start()
        return {
            #expect(done.wait(timeout: .now() + 40) == .success, "B's side did not end")
            return result.withLock { $0 }
        }
    }

    /// Lip sync: each receiver holds back the stream that plays ahead, from the sender reports,
    /// until picture and sound line up. Checked against the capture stamps the synthetic sources
    /// carry in the picture and in the tone, which know nothing of RTCP: without the hold the
    /// picture here comes about 45 ms before its sound (a 10 ms block, the audio jitter buffer
    /// and a speaker 30 ms deep, against a 320x240 picture's 5-10 ms).
    @Test func pictureAndSoundPlayInStep() throws {
        let pair = try CallMediaPair()
        // 16 s, not 10: on a loaded machine a jitter buffer that deepens late (seen in CI at 8 s:
        // B's offset from -23 to +48 ms) leaves the holds time to bring it back.
        let receivedByB = try measuringB(of: pair, seconds: 16)
        // The offset each side measures through the call, every 100 ms: it is unknown for the
        // second after each step of a hold (the stream is measured afresh), so the call's last
        // moment may fall in one; what counts is that the sides reach step and stay near it.
        let offsets = Mutex<(a: [Double], b: [Double])>(([], []))
        let sampling = Atomic<Bool>(true)
        Thread {
            while sampling.load(ordering: .relaxed) {
                let (a, b) = (pair.a.statistics()?.received, pair.b.statistics()?.received)
                offsets.withLock { o in
                    if let a, a.elapsed > .seconds(4), let value = a.avOffsetMs { o.a.append(value) }
                    if let b, b.elapsed > .seconds(4), let value = b.avOffsetMs { o.b.append(value) }
                }
                usleep(100_000)
            }
        }.start()
        var mediaA = try Call.Media.synthetic(width: 320, height: 240)
        mediaA.measuresLatency = true
        mediaA.audioPlayout = DeepSpeaker()
        let resultA = try pair.a.run(pair.aCall, media: mediaA, duration: .seconds(16))
        let receivedB = try #require(receivedByB())
        sampling.store(false, ordering: .relaxed)
        let measured = offsets.withLock { $0 }
        for (received, who, seen) in [(resultA.received, "at A", measured.a), (receivedB, "at B", measured.b)] {
            #expect(!seen.isEmpty, "\(who): no A/V offset after the first four seconds")
            #expect(seen.contains { abs($0) <= 20 }, "\(who): A/V offsets by the sender reports \(seen) ms")
            // A loaded machine (swift test runs suites side by side) may deepen a jitter buffer at
            // any moment, which moves the offset at once: the holds must bring it back, in steps
            // of at most 50 ms a second with a second's measuring after each, so within 4 s
            // (40 samples, more when the sampling itself runs late).
            let excursions = seen.indices.filter { abs(seen[$0]) > 60 }
            let unresolved = excursions.filter { i in i + 40 < seen.count && !seen[(i + 1)...(i + 40)].contains { abs($0) <= 20 } }
            #expect(unresolved.isEmpty, "\(who): A/V offsets by the sender reports \(seen) ms")
            #expect(received.lipSyncHoldMs.video > 20, "\(who): the picture was not held (\(received.lipSyncHoldMs))")
            // By the stamps, over the call: capture-to-screen against capture-to-speaker, the
            // medians (without the holds the picture leads by about 45 ms). Not a higher
            // percentile: on a loaded machine the picture's tail is the decode thread waiting for
            // a core (CI: p75 176 ms against the sound's 121, with the offsets by the reports
            // within 25 ms most of the call), which no hold can line up. An excursion in the last
            // 3 s is still being brought back, and says nothing of the holds.
            let video = try #require(received.videoLatencyMs.percentile(0.5)), audio = try #require(received.audioLatencyMs.percentile(0.5))
            print("lip sync \(who): picture p50 \((video).fixed(1)) ms p75 \((received.videoLatencyMs.percentile(0.75) ?? 0).fixed(1)) ms, "
                  + "sound p50 \((audio).fixed(1)) ms p75 \((received.audioLatencyMs.percentile(0.75) ?? 0).fixed(1)) ms after capture")
            if !excursions.contains(where: { $0 >= seen.count - 30 }) {
                #expect(abs(video - audio) <= 30, "\(who): picture \(video) ms, sound \(audio) ms after capture; offsets \(seen)")
            }
        }
        pair.a.transport.close()
        pair.b.transport.close()
    }

    /// The latency budget of the picture and the sound from A to B: A's hops (capture, encode,
    /// pacing) and B's (jitter buffer, lip sync's wait, decode; the speaker's delay), a
    /// measurement per frame and packet, adding up to what the capture stamps say.
    @Test func theLatencyBudgetAccountsForTheGlassToGlassTime() throws {
        let pair = try CallMediaPair()
        let receivedByB = try measuringB(of: pair, seconds: 6)
        let sentA = try pair.a.run(pair.aCall, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(6)).sent
        let receivedB = try #require(receivedByB())
        let (sent, received) = (sentA.videoBudget, receivedB.videoBudget)
        // Every frame sent was taken from its capture, encoded and paced; every frame decoded
        // waited in the jitter buffer and the decode stage.
        #expect(sent.count(.encode) >= sentA.videoFrames - 1 && sent.count(.capture) == sent.count(.encode), "\(sent), \(sentA.videoFrames) frames")
        #expect(sent.count(.pacing) >= sentA.videoFrames - 2 && sent.count(.pacing) <= sentA.videoFrames, "\(sent)")
        for hop in [LatencyBudget.Hop.jitterBuffer, .playout, .decode] {
            #expect(received.count(hop) == receivedB.framesDecoded, "\(hop): \(received), \(receivedB.framesDecoded) decoded")
        }
        #expect((received.meanMilliseconds(.decode) ?? 0) > 0 && (sent.meanMilliseconds(.encode) ?? 0) > 0)
        // The hops' means add up to the mean by the stamps (loopback: no network to speak of):
        // never more (but for the stamps' whole milliseconds), and less by the hand-offs between
        // the threads no hop counts (the media loops' on both sides: 1.5-2 ms here, more on a
        // loaded machine). A hop left out, or counted in another unit, is far outside.
        let hops = LatencyBudget.Hop.allCases.compactMap { sent.meanMilliseconds($0) } + LatencyBudget.Hop.allCases.compactMap { received.meanMilliseconds($0) }
        let total = hops.reduce(0, +), measured = try #require(receivedB.videoLatencyMs.mean)
        #expect(total <= measured + 1.5 && total >= measured - max(5, measured / 4),
                "video: hops \(sent.meansMilliseconds) + \(received.meansMilliseconds) = \(total) ms, the stamps' mean \(measured) ms")
        // Sound: a packet's first sample waits the packet's duration, the encoder adds its
        // lookahead, the speaker's delay is its own; the marks are found to 2.5 ms.
        let packet = try #require(sentA.audioBudget.meanMilliseconds(.capture))
        #expect((10...20).contains(packet), "10 or 20 ms packets, or both: \(sentA.audioBudget.meansMilliseconds)")
        #expect(receivedB.audioBudget.meanMilliseconds(.playout) == 30 && receivedB.audioBudget.count(.decode) == receivedB.audioDecoded)
        let sound = LatencyBudget.Hop.allCases.compactMap { sentA.audioBudget.meanMilliseconds($0) } + LatencyBudget.Hop.allCases.compactMap { receivedB.audioBudget.meanMilliseconds($0) }
        let heard = try #require(receivedB.audioLatencyMs.mean)
        // The hops are means over every packet, the marks a sample of them (one a second), found
        // to 2.5 ms: on a loaded machine the two means differ by a few milliseconds either way
        // (95.4 against 92.5 in one CI run). A hop counted twice or in another unit is 10 ms or more.
        #expect(sound.reduce(0, +) <= heard + max(2.5, heard / 20) && sound.reduce(0, +) >= heard - max(5, heard / 4), "audio: hops \(sentA.audioBudget.meansMilliseconds) + \(receivedB.audioBudget.meansMilliseconds) = \(sound.reduce(0, +)) ms, the marks' mean \(heard) ms")
        #expect(sentA.audioBudget.count(.pacing) >= sentA.audioPackets - 2 && sentA.audioBudget.count(.pacing) <= sentA.audioPackets,
                "\(sentA.audioBudget), \(sentA.audioPackets) packets")
        pair.a.transport.close()
        pair.b.transport.close()
    }

    /// In the middle of a call one side restarts ICE (as after an address change): the offer
    /// continues the session, the answer keeps the DTLS roles, media moves to the new path with
    /// the same keys and goes on. An answer naming another certificate is refused, and an offer
    /// from another session (a peer that restarted) is not taken for a continuation.
    @Test func anICERestartInTheMiddleOfACallKeepsMediaGoing() throws {
        let pair = try CallMediaPair()
        let results = Mutex<[String: (SenderStatistics, ReceiverSummary)]>([:])
        let done = DispatchSemaphore(value: 0)
        for (name, media, call) in [("a", pair.a, pair.aCall), ("b", pair.b, pair.bCall)] {
            Thread {
                if let r = try? media.run(call, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(5)) {
                    results.withLock { $0[name] = (r.sent, r.received) }
                }
                done.signal()
            }.start()
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && (pair.a.statistics()?.received.framesDecoded ?? 0) < 20 { usleep(10_000) }
        let keys = pair.a.transport.negotiatedKeys
        let offer = try JSEPDescription(type: .offer, sdp: try pair.b.restartOffer().sdp)
        #expect(pair.a.continuesSession(offer) && pair.b.awaitsRestartAnswer)
        let (answer, restartsICE) = try pair.a.answerRestart(offer)
        #expect(restartsICE && answer.transport.setup == .passive, "a stays the DTLS server: \(answer.transport.setup)")
        try pair.b.acceptRestart(try JSEPDescription(type: .answer, sdp: answer.sdp))
        func restarted(_ wire: CallMediaPair.Wire) -> Bool { wire.events.withLock { $0.contains { if case .restarted = $0 { return true }; return false } } }
        while Date() < deadline && !(restarted(pair.toA) && restarted(pair.toB)) { usleep(10_000) }
        #expect(restarted(pair.toA) && restarted(pair.toB), "both moved to the new path")
        #expect(pair.a.transport.negotiatedKeys == keys)

        // A forged answer to a second restart is refused; so is an offer of another session.
        let second = try pair.b.restartOffer()
        var forged = try pair.a.answerRestart(try JSEPDescription(type: .offer, sdp: second.sdp)).answer
        forged.transport.fingerprint = try DTLSCertificate().fingerprint
        #expect(throws: CallSecurityError.self) { try pair.b.acceptRestart(forged) }
        let stranger = try CallMedia(media: try Call.Media.synthetic(width: 320, height: 240), ice: .init(controlling: true),
                                     certificate: try DTLSCertificate()) { _ in }
        #expect(!pair.a.continuesSession(try JSEPDescription(type: .offer, sdp: stranger.offer().sdp)))
        stranger.transport.close()

        #expect(done.wait(timeout: .now() + 40) == .success && done.wait(timeout: .now() + 40) == .success)
        let r = results.withLock { $0 }
        for (from, to) in [("a", "b"), ("b", "a")] {
            let sent = try #require(r[from]?.0), received = try #require(r[to]?.1)
            #expect(Double(received.framesDecoded) >= 0.9 * Double(sent.videoFrames), "\(from) -> \(to): \(received.framesDecoded) of \(sent.videoFrames) frames")
        }
        pair.a.transport.close()
        pair.b.transport.close()
    }

    /// Under one SRTP master key (this side's DTLS export) every RTP packet has its own (SSRC,
    /// sequence number) and every RTCP packet its own (SSRC, SRTCP index): no keystream is used
    /// twice (RFC 3711 §9.1). A call's video, RTX, audio, sender reports and receiver feedback all
    /// go through the one outbound session of the bundled transport.
    @Test func everyKeystreamIsUsedOnce() throws {
        let pair = try CallMediaPair()
        let sent = Mutex<[[UInt8]]>([])
        pair.a.transport.observeSent { datagram in sent.withLock { $0.append(datagram) } }
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? pair.b.run(pair.bCall, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(3))
            done.signal()
        }.start()
        _ = try pair.a.run(pair.aCall, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(3))
        #expect(done.wait(timeout: .now() + 40) == .success)
        let profile = try #require(pair.a.transport.profile)
        var rtp = Set<[UInt8]>(), rtcp = Set<[UInt8]>(), rtcpSources = Set<[UInt8]>(), rtpSources = Set<[UInt8]>()
        var repeats = 0
        for d in sent.withLock({ $0 }) {
            if isRTCP(d) {
                // RFC 3711 §3.4: E flag and 31-bit index before the tag; RFC 7714 §9.1: after it.
                let at = profile == .aeadAes128Gcm ? d.count - 4 : d.count - 10 - 4
                let key = Array(d[4..<8]) + Array(d[at..<at + 4])
                if !rtcp.insert(key).inserted { repeats += 1 }
                rtcpSources.insert(Array(d[4..<8]))
            } else {
                let key = Array(d[8..<12]) + Array(d[2..<4])
                if !rtp.insert(key).inserted { repeats += 1 }
                rtpSources.insert(Array(d[8..<12]))
            }
        }
        #expect(repeats == 0, "\(repeats) packets reused a (key, SSRC, index)")
        // The MID (RFC 8843 §15.2) rides on the first packets of each stream, in the clear
        // header, until the peer's first receiver report for it; then no more. (The first packet
        // of each stream, not the first N of the call: a loaded machine may send a whole keyframe
        // before the first audio packet.)
        let media = sent.withLock { $0 }.filter { !isRTCP($0) }.compactMap { try? RTPPacket(parsing: $0) }
        func mid(_ packet: RTPPacket) -> String? { packet.headerExtension(id: 4).map { String(decoding: $0, as: UTF8.self) } }
        let mids = media.map(mid)
        var firstOfEachStream: [UInt32: RTPPacket] = [:]
        for packet in media where firstOfEachStream[packet.ssrc] == nil { firstOfEachStream[packet.ssrc] = packet }
        let firstMids = firstOfEachStream.values.map(mid)
        #expect(Set(firstMids.compactMap { $0 }) == ["0", "1"], "audio and video say their mid at first: \(firstMids)")
        #expect(mids.suffix(50).allSatisfy { $0 == nil }, "and stop once reported on")
        #expect(rtp.count > 200 && rtcp.count > 5, "\(rtp.count) RTP, \(rtcp.count) RTCP packets seen")
        #expect(rtpSources.count >= 2 && rtcpSources.count >= 3, "video, audio (RTX when probing) and the receiver's SSRC: \(rtpSources.count) RTP, \(rtcpSources.count) RTCP sources")
        pair.a.transport.close()
        pair.b.transport.close()
    }
}
