import Platform
import MediaCore
import RTPTransport
import Testing
@testable import CallEndpoint
import Signaling

/// The session controller driven in virtual time, with no socket: every path of a session's life
/// after its first offer/answer, as the actions it returns.
@Suite struct SessionControllerTests {
    let t0 = MediaTime(microseconds: 7_000_000_000)

    static func description(_ type: JSEPDescription.SDPType, ufrag: String) throws -> JSEPDescription {
        let sdp = """
            v=0\r
            o=- 42 2 IN IP4 127.0.0.1\r
            s=-\r
            t=0 0\r
            a=group:BUNDLE 0\r
            m=video 9 UDP/TLS/RTP/SAVPF 96\r
            c=IN IP4 0.0.0.0\r
            a=mid:0\r
            a=ice-ufrag:\(ufrag)\r
            a=ice-pwd:0123456789abcdefghijkl\r
            a=fingerprint:sha-256 \((0..<32).map { _ in "AB" }.joined(separator: ":"))\r
            a=setup:\(type == .offer ? "actpass" : "active")\r
            a=sendrecv\r
            a=rtcp-mux\r
            a=rtpmap:96 VP8/90000\r

            """
        return try JSEPDescription(type: type, sdp: sdp)
    }

    static func call(offerer: Bool) -> SessionController {
        SessionController(.init(offerer: offerer, restarts: .offers, gatheringWait: .seconds(2), peer: "b"))
    }

    /// The actions of one event, without log lines.
    static func acts(_ actions: [SessionController.Action]) -> [SessionController.Action] {
        actions.filter { if case .log = $0 { false } else { true } }
    }
    static func logs(_ actions: [SessionController.Action]) -> [String] {
        actions.compactMap { if case .log(let m) = $0 { m.text } else { nil } }
    }

    @Test func aPeerThatVanishesIsRestartedAfterTwoSecondsThenEveryThirtyAndTheAnswerIsTaken() throws {
        var c = Self.call(offerer: true)
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0)).isEmpty)
        let lost = c.handle(.transport(.pathLost(.consentExpired(silentFor: .milliseconds(30_040)))), at: t0)
        #expect(Self.logs(lost).first?.contains("consent expired (RFC 7675: nothing authenticated from the peer for 30.0 s)") == true, "\(Self.logs(lost))")
        #expect(c.nextTick == t0 + .seconds(2), "the driver's next tick: when the rechecks have had their time")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(1_999))).isEmpty, "rechecks first")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(2))) == [.restartICE(reason: "no path for 32 s")])
        #expect(Self.logs(c.handle(.restartBegan(ufrag: "new1", password: "p"), at: t0 + .seconds(2))) == ["ice: restarting (no path for 32 s)"])
        #expect(c.awaitingAnswer && c.restarts == 1)
        #expect(c.nextTick == t0 + .seconds(32), "the retry")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(31))).isEmpty, "one restart at a time")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(32))) == [.restartICE(reason: "no path for 62 s")])
        _ = c.handle(.restartBegan(ufrag: "new2", password: "p"), at: t0 + .seconds(32))
        let answer = try Self.description(.answer, ufrag: "theirs2")
        #expect(c.handle(.peerAnswer(answer), at: t0 + .seconds(33)) == [.accept(answer)])
        #expect(!c.awaitingAnswer)
        #expect(c.handle(.peerAnswer(answer), at: t0 + .seconds(34)).isEmpty, "an answer nobody waits for is dropped")
        _ = c.handle(.transport(.restarted(ufrag: "new2")), at: t0 + .seconds(34))
        _ = c.handle(.transport(.pathRestored), at: t0 + .seconds(34))
        #expect(c.nextTick == nil, "nothing is due while the path works")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(500))).isEmpty)
        #expect(c.restarts == 2)
    }

    @Test func anAgentThatCannotStartIsTriedAgainASecondLater() {
        var c = Self.call(offerer: true)
        _ = c.handle(.transport(.pathLost(.consentExpired(silentFor: .seconds(30)))), at: t0)
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(2))).count == 1)
        #expect(Self.logs(c.handle(.restartFailed("earlier agents still closing"), at: t0 + .seconds(2))) == ["ice: cannot restart: earlier agents still closing"])
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(2_999))).isEmpty)
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(3))).count == 1)
        #expect(c.restarts == 0 && !c.awaitingAnswer)
    }

    @Test func inGlareTheOffererWinsAndTheAnswererGivesWay() throws {
        let theirs = try Self.description(.offer, ufrag: "theirs2")
        // The offerer: its own restart is out; the peer's crossing offer is left for the peer to drop.
        var offerer = Self.call(offerer: true)
        _ = offerer.handle(.tick(addressesChanged: (["10.0.0.1"], ["10.0.0.2"])), at: t0)
        _ = offerer.handle(.restartBegan(ufrag: "mine2", password: "p"), at: t0)
        let crossing = offerer.handle(.peerOffer(theirs, continuesSession: true), at: t0 + .milliseconds(30))
        #expect(Self.acts(crossing).isEmpty && Self.logs(crossing) == ["ice: both sides restarted at once; the peer answers ours"])
        #expect(offerer.awaitingAnswer)
        // The answerer: its own restart gives way to the offerer's, which it answers.
        var answerer = Self.call(offerer: false)
        _ = answerer.handle(.tick(addressesChanged: (["10.0.0.3"], ["10.0.0.4"])), at: t0)
        _ = answerer.handle(.restartBegan(ufrag: "mine2", password: "p"), at: t0)
        #expect(answerer.handle(.peerOffer(theirs, continuesSession: true), at: t0 + .milliseconds(30)) == [.answer(theirs)])
        _ = answerer.handle(.answered(restartsICE: true), at: t0 + .milliseconds(30))
        #expect(!answerer.awaitingAnswer && answerer.restarts == 2)
        let late = try Self.description(.answer, ufrag: "theirs3")
        #expect(answerer.handle(.peerAnswer(late), at: t0 + .milliseconds(60)).isEmpty, "the peer's answer to the abandoned restart is dropped")
    }

    @Test func aRestartDuringARestartWaitsAndANewAddressRestartsAtOnceAndReconnects() {
        var c = Self.call(offerer: false)
        let first = c.handle(.tick(addressesChanged: (["10.0.0.1"], ["10.0.0.9"])), at: t0)
        #expect(Self.acts(first) == [.reconnectSignaling("local addresses changed"), .restartICE(reason: "local addresses changed")])
        #expect(Self.logs(first) == ["network: local addresses now 10.0.0.9 (were 10.0.0.1)"])
        _ = c.handle(.restartBegan(ufrag: "u2", password: "p"), at: t0)
        // Another change within the second: no second restart yet, nor while none began.
        #expect(!Self.acts(c.handle(.tick(addressesChanged: (["10.0.0.9"], ["10.0.0.7"])), at: t0 + .milliseconds(500))).contains(.restartICE(reason: "local addresses changed")))
        #expect(Self.acts(c.handle(.tick(addressesChanged: (["10.0.0.7"], ["10.0.0.8"])), at: t0 + .seconds(1))).contains(.restartICE(reason: "local addresses changed")))
    }

    /// The transport says when the peer's media arrives on a lost path (`heardWhileLost`, at
    /// most every 100 ms); the controller counts no packets.
    @Test func theLostPathThatStillCarriesThePeersMediaRestartsAQuarterSecondLater() {
        var c = Self.call(offerer: false)
        _ = c.handle(.transport(.pathLost(.consentExpired(silentFor: .seconds(30)))), at: t0)
        #expect(c.nextTick == t0 + .seconds(5), "the answerer's rechecks")
        _ = c.handle(.transport(.heardWhileLost), at: t0 + .milliseconds(100))
        #expect(c.nextTick == t0 + .seconds(5), "heard within the grace: stragglers from before the loss")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(100))).isEmpty)
        _ = c.handle(.transport(.heardWhileLost), at: t0 + .milliseconds(260))
        #expect(c.nextTick.map { $0 <= t0 + .milliseconds(260) } == true, "due at once")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(260))) == [.restartICE(reason: "the path lost while the peer's media arrives")])
        _ = c.handle(.restartBegan(ufrag: "u2", password: "p"), at: t0 + .milliseconds(260))
        #expect(c.nextTick == t0 + .milliseconds(5_260), "again after heardRetry while the media still arrives")
        // Heard while the path works (it cannot be, but a late event must not count).
        var quiet = Self.call(offerer: false)
        _ = quiet.handle(.transport(.heardWhileLost), at: t0)
        #expect(quiet.nextTick == nil)
    }

    /// Local addresses that change again within a second of the restart the last change made
    /// (a WHIP publisher's address added, then its first removed) restart once the second is
    /// up: the change is kept, not dropped by the one-restart-a-second rule.
    @Test func anAddressChangeTooSoonAfterARestartRestartsWhenTheSecondIsUp() {
        var c = SessionController(.init(offerer: true, restarts: .fragmentsToServer(maxTries: 2), gatheringWait: .seconds(3), peer: "s"))
        #expect(Self.acts(c.handle(.tick(addressesChanged: (["10.0.0.1"], ["10.0.0.1", "10.0.0.3"])), at: t0)) == [.restartICE(reason: "local addresses changed")])
        _ = c.handle(.restartBegan(ufrag: "r1", password: "p"), at: t0 + .milliseconds(2))
        _ = c.handle(.transport(.gatheringDone(ufrag: "r1")), at: t0 + .milliseconds(5))
        _ = c.handle(.restartAnswered, at: t0 + .milliseconds(10))
        #expect(c.nextTick == nil)
        #expect(Self.acts(c.handle(.tick(addressesChanged: (["10.0.0.1", "10.0.0.3"], ["10.0.0.3"])), at: t0 + .milliseconds(1_000))).isEmpty, "not within the second")
        #expect(c.nextTick == t0 + .milliseconds(1_002), "but kept for when the second is up")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(1_002))) == [.restartICE(reason: "local addresses changed")])
        _ = c.handle(.restartBegan(ufrag: "r2", password: "p"), at: t0 + .milliseconds(1_002))
        _ = c.handle(.transport(.gatheringDone(ufrag: "r2")), at: t0 + .milliseconds(1_005))
        #expect(c.nextTick == nil, "answered by that restart")
    }

    /// A restart that could not start is due again when its pause ends, not before: a driver
    /// waiting for `nextTick` never spins on a moment that has passed.
    @Test func theNextTickMovesOnOnceItsMomentIsTaken() {
        var c = Self.call(offerer: true)
        _ = c.handle(.transport(.pathLost(.consentExpired(silentFor: .seconds(30)))), at: t0)
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(2))) == [.restartICE(reason: "no path for 32 s")])
        #expect(c.nextTick == nil, "the restart asked for is under way")
        _ = c.handle(.restartFailed("no agent"), at: t0 + .seconds(2))
        #expect(c.nextTick == t0 + .seconds(3))
        _ = c.handle(.bye(refusal: nil), at: t0 + .milliseconds(2_500))
        #expect(c.nextTick == nil, "an ended session has no moments")
    }

    @Test func anOfferOfANewSessionEndsTheRoundAndAByeEndsItWithItsReason() throws {
        let offer = try Self.description(.offer, ufrag: "xxxx")
        var c = Self.call(offerer: true)
        #expect(c.handle(.peerOffer(offer, continuesSession: false), at: t0) == [.end(.newSession)])
        #expect(c.ended == .newSession)
        #expect(c.handle(.peerCandidate(line: "candidate:1", ufrag: nil), at: t0).isEmpty, "nothing after the end")
        var refused = Self.call(offerer: false)
        #expect(refused.handle(.bye(refusal: "busy"), at: t0) == [.end(.refused("busy"))])
        var left = Self.call(offerer: false)
        #expect(left.handle(.bye(refusal: nil), at: t0) == [.end(.bye)])
    }

    @Test func anUnreadableOfferIsLoggedAndTheSessionGoesOn() {
        var c = Self.call(offerer: true)
        let actions = c.handle(.unreadableOffer("no m= line"), at: t0)
        #expect(Self.acts(actions).isEmpty && Self.logs(actions) == ["signaling: ignored an offer of b that callend cannot read: no m= line"])
        #expect(c.ended == nil)
        #expect(c.handle(.peerCandidate(line: "candidate:1 1 udp 1 10.0.0.1 9 typ host", ufrag: "u"), at: t0) == [.addRemoteCandidate(line: "candidate:1 1 udp 1 10.0.0.1 9 typ host", ufrag: "u")])
    }

    @Test func aFloodOfRestartOffersIsAnsweredFourAtOnceThenOnePerFiveSeconds() throws {
        var c = Self.call(offerer: false)
        let offer = try Self.description(.offer, ufrag: "again")
        var answered = 0
        for i in 0..<20 where c.handle(.peerOffer(offer, continuesSession: true), at: t0 + .milliseconds(i * 10)).contains(.answer(offer)) { answered += 1 }
        #expect(answered == 4)
        #expect(!c.handle(.peerOffer(offer, continuesSession: true), at: t0 + .milliseconds(4_000)).contains(.answer(offer)))
        #expect(c.handle(.peerOffer(offer, continuesSession: true), at: t0 + .milliseconds(5_200)).contains(.answer(offer)))
    }

    @Test func localCandidatesTrickleAndTheEndOfGatheringSaysWhatWasFound() {
        var c = Self.call(offerer: true)
        #expect(c.handle(.transport(.localCandidate("candidate:1 1 udp 9 10.0.0.1 5000 typ host", ufrag: "u")), at: t0)
                == [.trickle(line: "candidate:1 1 udp 9 10.0.0.1 5000 typ host", ufrag: "u")])
        _ = c.handle(.transport(.localCandidate("candidate:2 1 udp 8 192.0.2.1 6000 typ srflx raddr 10.0.0.1 rport 5000", ufrag: "u")), at: t0)
        _ = c.handle(.transport(.localCandidate("candidate:3 1 udp 7 10.0.0.2 5001 typ host", ufrag: "u")), at: t0)
        let done = c.handle(.transport(.gatheringDone(ufrag: "u")), at: t0)
        #expect(Self.logs(done) == ["ice: gathered 2 host, 1 srflx"])
        #expect(Self.acts(done) == [.trickle(line: "", ufrag: "u")])
    }

    /// A WHIP publisher in the room restarts by fragment: the answer waits for our new agent's
    /// candidates, until gathering ends or two seconds pass.
    @Test func aPeersFragmentRestartIsAnsweredWithTheNewAgentsCandidates() {
        var c = Self.call(offerer: false)
        #expect(c.handle(.peerRestartFragment(ufrag: "pub2", password: "pw", candidates: ["candidate:9"]), at: t0)
                == [.answerRestartFragment(ufrag: "pub2", password: "pw", candidates: ["candidate:9"])])
        #expect(Self.logs(c.handle(.restartBegan(ufrag: "mine2", password: "mp"), at: t0)) == ["ice: b restarts ICE by fragment (RFC 9725 §4.4)"])
        #expect(c.nextTick == t0 + .seconds(2), "the fragment goes then at the latest")
        #expect(c.handle(.transport(.localCandidate("candidate:a", ufrag: "mine2")), at: t0).isEmpty, "held for the answer, not trickled")
        #expect(c.handle(.transport(.localCandidate("candidate:old", ufrag: "mine1")), at: t0) == [.trickle(line: "candidate:old", ufrag: "mine1")])
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(1_999))).isEmpty)
        _ = c.handle(.transport(.localCandidate("candidate:b", ufrag: "mine2")), at: t0 + .seconds(1))
        let answered = c.handle(.transport(.gatheringDone(ufrag: "mine2")), at: t0 + .seconds(1))
        #expect(Self.acts(answered) == [.sendRestartFragment(ICEFragment(ufrag: "mine2", password: "mp", candidates: ["candidate:a", "candidate:b"], endOfCandidates: true))])
        #expect(Self.logs(answered) == ["ice: answered the restart of b with 2 candidates"])
        #expect(c.restarts == 1 && c.nextTick == nil)
        // A second one whose agent never ends gathering: what there is goes after two seconds,
        // and the answer does not say the candidates ended.
        _ = c.handle(.peerRestartFragment(ufrag: "pub3", password: "pw", candidates: []), at: t0 + .seconds(10))
        _ = c.handle(.restartBegan(ufrag: "mine3", password: "mp"), at: t0 + .seconds(10))
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(12)))
                == [.sendRestartFragment(ICEFragment(ufrag: "mine3", password: "mp", candidates: [], endOfCandidates: false))])
        // One whose agent cannot start is said, and the session goes on.
        _ = c.handle(.peerRestartFragment(ufrag: "pub4", password: "pw", candidates: []), at: t0 + .seconds(20))
        #expect(Self.logs(c.handle(.restartFailed("no sockets"), at: t0 + .seconds(20))) == ["ice: cannot answer the restart of b: no sockets"])
        #expect(c.restarts == 2 && c.ended == nil)
    }

    /// A WHIP publisher restarts by PATCH: its fragment goes once gathered; a PATCH that cannot
    /// reach the server goes again 2 s later; two restarts without a path make a new POST.
    @Test func aPublisherRestartsByFragmentRetriesAnUndeliveredOneAndRepostsAfterTwo() {
        var c = SessionController(.init(offerer: true, restarts: .fragmentsToServer(maxTries: 2), gatheringWait: .seconds(3), peer: "the WHIP server"))
        _ = c.handle(.transport(.pathLost(.consentExpired(silentFor: .seconds(30)))), at: t0)
        #expect(Self.acts(c.handle(.tick(addressesChanged: (["10.0.0.1"], ["10.0.0.2"])), at: t0 + .milliseconds(100)))
                == [.restartICE(reason: "local addresses changed")], "no signaling connection to reconnect")
        #expect(Self.logs(c.handle(.restartBegan(ufrag: "r1", password: "p"), at: t0 + .milliseconds(100))) == ["ice: restarting (local addresses changed) by PATCH"])
        #expect(c.handle(.transport(.localCandidate("candidate:h", ufrag: "r1")), at: t0 + .milliseconds(150)).isEmpty)
        #expect(c.handle(.transport(.gatheringDone(ufrag: "r1")), at: t0 + .milliseconds(200))
                == [.sendRestartFragment(ICEFragment(ufrag: "r1", password: "p", candidates: ["candidate:h"], endOfCandidates: true))])
        // The network is down: the PATCH did not arrive.
        _ = c.handle(.restartUndelivered("no route to host"), at: t0 + .milliseconds(200))
        #expect(c.nextTick == t0 + .milliseconds(2_200), "the retry's moment")
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(2_100))).isEmpty)
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(2_200))) == [.restartICE(reason: "again")])
        _ = c.handle(.restartBegan(ufrag: "r2", password: "p"), at: t0 + .milliseconds(2_200))
        // Gathering never ends: after 3 s what there is goes; the server answers; no path comes of it.
        #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(5_200)))
                == [.sendRestartFragment(ICEFragment(ufrag: "r2", password: "p", candidates: [], endOfCandidates: true))], "a PATCHed fragment is all there is")
        #expect(c.nextTick == t0 + .milliseconds(32_200), "the policy's next restart")
        #expect(Self.logs(c.handle(.restartAnswered, at: t0 + .milliseconds(5_300))) == ["whip: ICE restart answered; checking the new path"])
        // Thirty seconds later the policy would restart a third time: a new POST instead.
        #expect(c.handle(.tick(addressesChanged: nil), at: t0 + .milliseconds(32_200)) == [.end(.repost("two ICE restarts did not bring the path back"))])
    }

    /// A WHEP viewer's session (and a mesh peer's, a Janus one's) never restarts on its own: the
    /// player does, by PATCH; its lines carry the viewer's name.
    @Test func aViewersSessionOnlyAnswersRestartsAndItsLinesSayWhose() {
        var c = SessionController(.init(offerer: false, restarts: .answersOnly, gatheringWait: .seconds(2), peer: "whep~1", logPrefix: "whep: whep~1: "))
        #expect(Self.logs(c.handle(.transport(.pathLost(.consentExpired(silentFor: .seconds(30)))), at: t0)).first?.hasPrefix("whep: whep~1: ice: consent expired") == true)
        // The agent's own failure says so: the two causes are told apart in the log.
        var failed = SessionController(.init(offerer: false, restarts: .answersOnly, gatheringWait: .seconds(2), peer: "whep~2", logPrefix: "whep: whep~2: "))
        #expect(Self.logs(failed.handle(.transport(.pathLost(.pairFailed)), at: t0)).first?.hasPrefix("whep: whep~2: ice: the ICE agent failed the path") == true)
        for s in [2, 5, 40, 100] { #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: t0 + .seconds(s))).isEmpty) }
        #expect(c.handle(.transport(.secured(.aeadAes128Gcm)), at: t0).contains(.secured))
        _ = c.handle(.peerRestartFragment(ufrag: "pl2", password: "pw", candidates: []), at: t0 + .seconds(101))
        _ = c.handle(.restartBegan(ufrag: "v2", password: "vp"), at: t0 + .seconds(101))
        #expect(Self.acts(c.handle(.transport(.gatheringDone(ufrag: "v2")), at: t0 + .seconds(101))).count == 1)
        #expect(c.restarts == 1)
    }

    @Test func aRestartThatBringsThePathBackLetsTheNextOutageRestartAgain() {
        var c = SessionController(.init(offerer: true, restarts: .fragmentsToServer(maxTries: 2), gatheringWait: .seconds(3), peer: "s"))
        for round in 0..<3 {
            let at = t0 + .seconds(100 * round)
            _ = c.handle(.transport(.pathLost(.consentExpired(silentFor: .seconds(30)))), at: at)
            #expect(Self.acts(c.handle(.tick(addressesChanged: nil), at: at + .seconds(2))).count == 1, "round \(round)")
            _ = c.handle(.restartBegan(ufrag: "r\(round)", password: "p"), at: at + .seconds(2))
            _ = c.handle(.transport(.gatheringDone(ufrag: "r\(round)")), at: at + .seconds(2))
            _ = c.handle(.restartAnswered, at: at + .seconds(2))
            _ = c.handle(.transport(.restarted(ufrag: "r\(round)")), at: at + .seconds(3))
            _ = c.handle(.transport(.pathRestored), at: at + .seconds(3))
        }
        #expect(c.ended == nil && c.restarts == 3)
    }
}
