import Dispatch
import Foundation
import Platform
import Synchronization
import Testing
import TestSupport
@testable import RTPTransport
import ICEServers

/// Two bundled transports in one process, wired as a call would wire them: descriptions carry
/// credentials and fingerprints, candidates trickle, the answerer opens DTLS (a=setup:active).
final class TransportPair: Sendable {
    final class Side: Sendable {
        let events = Mutex<[BundleTransport.Event]>([])
        let received = Mutex<[ReceivedPacket]>([])
        let secured = DispatchSemaphore(value: 0)
        let peer = Mutex<BundleTransport?>(nil)
        let pending = Mutex<[String]>([])
        func event(_ e: BundleTransport.Event) {
            events.withLock { $0.append(e) }
            switch e {
            case .secured: secured.signal()
            case .localCandidate(let c, let ufrag):
                if let p = peer.withLock({ $0 }) { try? p.addRemoteCandidate(c, ufrag: ufrag) } else { pending.withLock { $0.append(c) } }
            case .gatheringDone(let ufrag):
                if let p = peer.withLock({ $0 }) { p.remoteGatheringDone(ufrag: ufrag) }
            default: break
            }
        }
    }
    let offerer: BundleTransport, answerer: BundleTransport
    let a = Side(), b = Side()

    init(localAddresses: [String] = ["127.0.0.1"], answererCertificate: DTLSCertificate? = nil, announcedAnswererFingerprint: DTLSFingerprint? = nil,
         consentExpiry: Duration = PathConsent.defaultExpiry, answererDelivers: Bool = true) throws {
        var ice = ICEAgent.Configuration(controlling: true)
        ice.localAddresses = localAddresses
        let (a, b) = (a, b)
        offerer = try BundleTransport(configuration: .init(ice: ice, certificate: try DTLSCertificate(), consentExpiry: consentExpiry), onEvent: { a.event($0) })
        ice.controlling = false
        let answererCertificate = try answererCertificate ?? DTLSCertificate()
        answerer = try BundleTransport(configuration: .init(ice: ice, certificate: answererCertificate, consentExpiry: consentExpiry), onEvent: { b.event($0) })
        offerer.startDelivering { p in a.received.withLock { $0.append(p) } }
        if answererDelivers { answerer.startDelivering { p in b.received.withLock { $0.append(p) } } }
        try offerer.start()
        try answerer.start()
        func transport(_ t: BundleTransport, _ setup: JSEPDescription.Setup, fingerprint: DTLSFingerprint? = nil) -> JSEPDescription.Transport {
            .init(ufrag: t.localCredentials.ufrag, password: t.localCredentials.password, fingerprint: fingerprint ?? t.fingerprint, setup: setup)
        }
        // Offer, then answer: the answerer learns the offer first and opens DTLS.
        try answerer.setRemote(transport(offerer, .actpass), role: .client)
        try offerer.setRemote(transport(answerer, .active, fingerprint: announcedAnswererFingerprint), role: .server)
        a.peer.withLock { $0 = answerer }
        b.peer.withLock { $0 = offerer }
        for c in a.pending.withLock({ $0 }) { try answerer.addRemoteCandidate(c) }
        for c in b.pending.withLock({ $0 }) { try offerer.addRemoteCandidate(c) }
    }

    func close() {
        offerer.close()
        answerer.close()
    }

    /// Both sides restart ICE and trickle before either description lands; returns once both
    /// have moved media to the new agents (whose credentials the offerer's are then).
    /// `offered` sees the offerer's new credentials while the old agent still carries media.
    @discardableResult
    func restart(offered check: ((ufrag: String, password: String)) -> Void = { _ in }) throws -> (ufrag: String, password: String) {
        func count(_ side: Side) -> Int { side.events.withLock { $0.filter { if case .restarted = $0 { return true }; return false }.count } }
        let before = (count(a), count(b))
        let offered = try offerer.restartICE(controlling: true)
        check(offered)
        let answered = try answerer.restartICE(controlling: false)
        func gathered(_ ufrag: String) -> Bool {
            (a.events.withLock { $0 } + b.events.withLock { $0 }).contains { if case .gatheringDone(ufrag) = $0 { return true }; return false }
        }
        let gathering = Date().addingTimeInterval(20)
        while Date() < gathering && !(gathered(offered.ufrag) && gathered(answered.ufrag)) { usleep(10_000) }
        #expect(gathered(offered.ufrag) && gathered(answered.ufrag))
        try answerer.setRestartRemote(.init(ufrag: offered.ufrag, password: offered.password, fingerprint: offerer.fingerprint, setup: .actpass))
        try offerer.setRestartRemote(.init(ufrag: answered.ufrag, password: answered.password, fingerprint: answerer.fingerprint, setup: .active))
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && !(count(a) > before.0 && count(b) > before.1) { usleep(10_000) }
        #expect(count(a) > before.0 && count(b) > before.1, "\(a.events.withLock { $0 })")
        return offered
    }
}

@Suite(.serialized) struct BundleTransportTests {
    @Test func mediaFlowsOnlyOnceDTLSHasKeyedSRTP() throws {
        let pair = try TransportPair()
        defer { pair.close() }
        #expect(pair.a.secured.wait(timeout: .now() + 20) == .success, "offerer: \(pair.a.events.withLock { $0 })")
        #expect(pair.b.secured.wait(timeout: .now() + 20) == .success, "answerer: \(pair.b.events.withLock { $0 })")
        let rtp = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 3000, ssrc: 0xabc, payload: [1, 2, 3, 4]).serialized()
        let rtcp = RTCPPacket.serializeCompound([.receiverReport(ReceiverReport(ssrc: 0xdef))])
        #expect(pair.offerer.sendRTP(rtp, kind: .video) && pair.offerer.sendRTCP(rtcp, kind: .video))
        #expect(pair.answerer.sendRTP(rtp, kind: .audio))
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline && (pair.b.received.withLock { $0.count } < 2 || pair.a.received.withLock { $0.isEmpty }) { usleep(5_000) }
        let got = pair.b.received.withLock { $0 }
        #expect(got.map(\.bytes) == [rtp, rtcp] && got.map(\.isRTCP) == [false, true], "clear packets arrive, in order")
        #expect(pair.a.received.withLock { $0.map(\.bytes) } == [rtp])
        #expect(pair.offerer.profile == .aeadAes128Gcm && pair.offerer.overhead == 16)
        let chosen = try #require(pair.offerer.selectedPair)
        #expect(chosen.local.type == "host" && chosen.local.address == "127.0.0.1", "\(chosen)")
    }

    /// The peer's media that authenticates before this side takes it (its encoder and decoder
    /// still opening: the peer sends as soon as its side is keyed) is kept, and handed over
    /// first, in order, with how long ago it came; past `maxUndelivered` it is counted. Before,
    /// it was dropped.
    @Test func mediaBeforeDeliveryStartsIsKeptAndHandedOverInOrder() throws {
        let pair = try TransportPair(answererDelivers: false)
        defer { pair.close() }
        #expect(pair.a.secured.wait(timeout: .now() + 20) == .success && pair.b.secured.wait(timeout: .now() + 20) == .success)
        let count = BundleTransport.maxUndelivered + 40
        func rtp(_ n: Int) -> [UInt8] { RTPPacket(payloadType: 96, sequenceNumber: UInt16(n), timestamp: 0, ssrc: 0xabc, payload: [UInt8(n & 0xff)]).serialized() }
        // In steps of 50, each once the last has arrived (no socket buffer overflows).
        for step in stride(from: 0, to: count, by: 50) {
            for n in step..<min(count, step + 50) { #expect(pair.offerer.sendRTP(rtp(n), kind: .video)) }
            #expect(eventually(10) { pair.answerer.packetsAuthenticated >= min(count, step + 50) })
        }
        #expect(pair.answerer.packetsAuthenticated == count)
        #expect(pair.answerer.counters.undeliveredDropped == 40)
        #expect(pair.b.received.withLock { $0.isEmpty })
        let b = pair.b
        pair.answerer.startDelivering { p in b.received.withLock { $0.append(p) } }
        let kept = b.received.withLock { $0 }
        #expect(kept.map(\.bytes) == (0..<BundleTransport.maxUndelivered).map(rtp), "the first 512, in order")
        #expect(kept.allSatisfy { $0.age > .zero && !$0.isRTCP })
        // From then on, straight through.
        #expect(pair.offerer.sendRTP(rtp(count), kind: .video))
        #expect(eventually(10) { b.received.withLock { $0.count } > kept.count })
        #expect(b.received.withLock { $0.last?.bytes } == rtp(count) && b.received.withLock { $0.last?.age } == .zero)
    }

    /// An ICE restart gathers under new credentials and moves media to the new agent's path
    /// once it works (make before break); DTLS is not repeated and the SRTP keys stay. The
    /// restart's candidates may arrive before its description: they wait for it.
    @Test func anICERestartMovesMediaToANewPathAndKeepsTheKeys() throws {
        let pair = try TransportPair()
        defer { pair.close() }
        #expect(pair.a.secured.wait(timeout: .now() + 20) == .success && pair.b.secured.wait(timeout: .now() + 20) == .success)
        let keys = try #require(pair.offerer.negotiatedKeys)
        let before = try #require(pair.offerer.selectedPair)
        let offered = try pair.restart { offered in
            #expect(offered != pair.offerer.localCredentials, "new credentials, the old ones still in use")
            #expect(pair.offerer.restartUnderWay == (true, false))
        }
        let fingerprint = pair.offerer.fingerprint
        let deadline = Date().addingTimeInterval(20)
        #expect(pair.offerer.localCredentials == offered && pair.offerer.restartUnderWay == (false, false))
        #expect(pair.offerer.selectedPair != before, "a new pair: \(String(describing: pair.offerer.selectedPair)) after \(before)")
        #expect(pair.offerer.negotiatedKeys == keys, "no new DTLS handshake")
        let rtp = RTPPacket(payloadType: 96, sequenceNumber: 5, timestamp: 1, ssrc: 0xabc, payload: [5]).serialized()
        #expect(pair.offerer.sendRTP(rtp, kind: .video))
        while Date() < deadline && !pair.b.received.withLock({ $0.contains { $0.bytes == rtp } }) { usleep(5_000) }
        #expect(pair.b.received.withLock { $0.contains { $0.bytes == rtp } }, "media on the new path")
        // An answer for a restart nobody started is refused.
        #expect(throws: ICEError.self) {
            try pair.offerer.setRestartRemote(.init(ufrag: "x", password: "y", fingerprint: fingerprint, setup: .active))
        }
    }

    /// Consent to send (RFC 7675) lives on the peer's authenticated packets, not on libnice's
    /// checks: while the peer's media arrives the path stays (at any loss it survives), and once
    /// nothing came for the expiry, sending stops (`pathLost`) until a recheck or the peer's
    /// packets bring it back. The expiry is 30 s in a call; 1 s here (a loaded machine may
    /// stall a sending thread for a few hundred milliseconds, never for a second).
    @Test func consentLivesOnThePeersPacketsAndExpiresWithoutThem() throws {
        let pair = try TransportPair(consentExpiry: .seconds(1))
        defer { pair.close() }
        #expect(pair.a.secured.wait(timeout: .now() + 20) == .success && pair.b.secured.wait(timeout: .now() + 20) == .success)
        func lost(_ side: TransportPair.Side) -> Int {
            side.events.withLock { $0.filter { if case .pathLost(.consentExpired(let silence)) = $0 { silence >= .seconds(1) } else { false } }.count }
        }
        // A new sequence number each time: SRTP refuses a replayed packet, and a refused one is no sign.
        var sequence: UInt16 = 0
        func rtp() -> [UInt8] {
            sequence &+= 1
            return RTPPacket(payloadType: 96, sequenceNumber: sequence, timestamp: 1, ssrc: 0xabc, payload: [1]).serialized()
        }
        // 2 s of packets both ways, each way every 20 ms (a sender's pace, not a wait for
        // anything): two expiries long, and no loss of consent.
        for _ in 0..<100 {
            pair.offerer.sendRTP(rtp(), kind: .video)
            pair.answerer.sendRTP(rtp(), kind: .video)
            usleep(20_000)
        }
        #expect(lost(pair.a) == 0 && lost(pair.b) == 0, "\(pair.a.events.withLock { $0 })")
        // Now only the offerer sends: its consent expires, the answerer's (which hears it) stays.
        let silent = Date()
        while Date() < silent.addingTimeInterval(10) && lost(pair.a) == 0 {
            pair.offerer.sendRTP(rtp(), kind: .video)
            usleep(20_000)
        }
        #expect(lost(pair.a) >= 1, "the offerer lost the path once the answerer went silent")
        #expect(Date().timeIntervalSince(silent) >= 0.98, "not before the expiry: \(Date().timeIntervalSince(silent)) s")
        #expect(lost(pair.b) == 0, "the answerer kept hearing the offerer")
        #expect(pair.offerer.pathLostSince != nil || pair.a.events.withLock { $0.contains(.pathRestored) })
        // The answerer speaks again (and the recheck runs): the offerer sends again.
        let back = Date()
        var delivered = false
        while Date() < back.addingTimeInterval(10) && !delivered {
            pair.answerer.sendRTP(rtp(), kind: .video)
            delivered = pair.offerer.sendRTP(rtp(), kind: .video) && pair.offerer.pathLostSince == nil
            usleep(20_000)
        }
        #expect(delivered && pair.a.events.withLock { $0.contains(.pathRestored) }, "\(pair.a.events.withLock { $0 })")
    }

    /// Threads keep sending while restarts replace the agent under them and the old agents are
    /// freed: a send under way finishes before its agent goes (the gate in ICEAgent), so the
    /// process survives, and media reaches the peer on each new path.
    @Test func sendingWhileTheTransportRestartsIsSafe() throws {
        let pair = try TransportPair()
        defer { pair.close() }
        #expect(pair.a.secured.wait(timeout: .now() + 20) == .success && pair.b.secured.wait(timeout: .now() + 20) == .success)
        let stop = Atomic<Bool>(false)
        let sent = Atomic<Int>(0)
        let done = DispatchGroup()
        for thread in 0..<2 {
            done.enter()
            Thread.detachNewThread {
                var sequence: UInt16 = 0
                while !stop.load(ordering: .relaxed) {
                    sequence &+= 1
                    let rtp = RTPPacket(payloadType: 96, sequenceNumber: sequence, timestamp: 0, ssrc: UInt32(0x100 + thread), payload: [UInt8](repeating: 7, count: 200))
                    if pair.offerer.sendRTP(rtp.serialized(), kind: .video) { sent.add(1, ordering: .relaxed) }
                    usleep(100)  // about 10,000 packets a second each: the receiving side keeps them all
                }
                done.leave()
            }
        }
        defer {
            stop.store(true, ordering: .relaxed)
            done.wait()
        }
        for round in 1...3 {
            try pair.restart()
            let arrived = pair.b.received.withLock { $0.count }
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline && pair.b.received.withLock({ $0.count }) <= arrived { usleep(5_000) }
            #expect(pair.b.received.withLock { $0.count } > arrived, "media after restart \(round)")
        }
        #expect(sent.load(ordering: .relaxed) > 0)
    }

    /// A datagram from anywhere but the selected pair's remote end never reaches the transport:
    /// libnice drops it (else SRTP would have refused it, and counted).
    @Test func packetsFromAnotherAddressAreDropped() throws {
        let pair = try TransportPair()
        defer { pair.close() }
        #expect(pair.a.secured.wait(timeout: .now() + 20) == .success && pair.b.secured.wait(timeout: .now() + 20) == .success)
        let local = try #require(pair.answerer.selectedPair?.local)
        let stranger = try UDPSocket(bindHost: "127.0.0.1")
        defer { stranger.close() }
        let forged = RTPPacket(payloadType: 96, sequenceNumber: 9, timestamp: 1, ssrc: 0xabc, payload: [9, 9, 9]).serialized()
        for _ in 0..<20 { try stranger.send(forged, to: try UDPAddress(host: local.address, port: local.port)) }
        // Then a real packet from the peer, which arrives after the forged ones on the same socket.
        let real = RTPPacket(payloadType: 96, sequenceNumber: 2, timestamp: 2, ssrc: 0xabc, payload: [7]).serialized()
        #expect(pair.offerer.sendRTP(real, kind: .video))
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline && pair.b.received.withLock({ $0.isEmpty }) { usleep(5_000) }
        #expect(pair.b.received.withLock { $0.map(\.bytes) } == [real])
        #expect(pair.answerer.counters.refused == 0, "the forged datagrams never got past ICE: \(pair.answerer.counters)")
    }

    /// The answerer holds another certificate than the one its description announced: the
    /// offerer refuses it and no key is agreed.
    @Test func aCertificateThatIsNotTheAnnouncedOneFailsTheCall() throws {
        let announced = try DTLSCertificate()
        let pair = try TransportPair(announcedAnswererFingerprint: announced.fingerprint)
        defer { pair.close() }
        let deadline = Date().addingTimeInterval(20)
        func failure() -> String? {
            pair.a.events.withLock { $0.compactMap { if case .untrusted(let why) = $0 { return why }; return nil }.first }
        }
        while Date() < deadline && failure() == nil { usleep(10_000) }
        #expect(failure()?.contains("does not match the fingerprint") == true, "\(pair.a.events.withLock { $0 })")
        #expect(!pair.offerer.sendRTP([0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1], kind: .video), "nothing goes out without keys")
    }
}

