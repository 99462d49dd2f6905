import EndpointSignaling
import Foundation
import Platform
import Signaling
import SignalingService
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

@Suite struct RenegotiationLimitTests {
    /// A burst goes through, then one per interval; the wait says when the next will.
    @Test func aBurstThenOnePerInterval() {
        var limit = RenegotiationLimit(burst: 3, interval: .seconds(5))
        let start = Duration.seconds(100)
        var first: [Bool] = []
        for _ in 0..<3 { first.append(limit.allow(at: start)) }
        #expect(first == [true, true, true])
        let refusedAtOnce = limit.allow(at: start), refusedLater = limit.allow(at: start + .seconds(4))
        #expect(!refusedAtOnce && !refusedLater)
        #expect(limit.wait(at: start + .seconds(4)) > .zero)
        #expect(limit.wait(at: start + .seconds(5)) == .zero)
        let afterInterval = limit.allow(at: start + .seconds(5)), soonAfter = limit.allow(at: start + .seconds(6))
        #expect(afterInterval && !soonAfter)
        // A long quiet spell refills the burst, no more.
        let later = start + .seconds(600)
        var refilled: [Bool] = []
        for _ in 0..<4 { refilled.append(limit.allow(at: later)) }
        #expect(refilled == [true, true, true, false])
        // A flood of a hundred a second for ten seconds gets through what the rate allows.
        var flood = RenegotiationLimit()
        var passed = 0
        for i in 0..<1000 where flood.allow(at: .milliseconds(10 * i)) { passed += 1 }
        #expect(passed <= 4 + 2, "\(passed) of a thousand")
    }
}

/// A signaling service on loopback for room tests, and tokens for its room "lab".
struct LabService {
    let server: SignalingServer
    private let secret: TokenSecret

    init(maxParticipants: Int) throws {
        var configuration = SignalingServerConfiguration(host: "127.0.0.1", port: 0, secret: TokenSecret.random())
        configuration.limits.maxParticipantsPerRoom = maxParticipants
        secret = configuration.secret
        server = try SignalingServer(configuration: configuration)
        server.start()
    }

    var port: Int { server.port }

    func token(_ who: String) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenIssuer(secret: secret).mint(TokenClaims(identity: who, room: "lab", issuedAt: now, expires: now + 600))
    }
}

/// Collects a call's log lines.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
    var sink: @Sendable (LogMessage) -> Void { { [self] line in self.lines.withLock { $0.append(line.text) } } }
    func contains(_ text: String) -> Bool { lines.withLock { $0.contains { $0.contains(text) } } }
}

@Suite(.serialized) struct CallPeerTests {
    /// A third participant in the room sends both endpoints of a call offers, answers,
    /// candidates and byes: each endpoint ignores (and logs) what does not come from its peer,
    /// and the call goes on.
    @Test func aCallListensOnlyToItsPeer() throws {
        let service = try LabService(maxParticipants: 3)
        let server = service.server
        defer { server.stop() }
        @Sendable func token(_ who: String) -> String { service.token(who) }
        let (aliceLog, bobLog) = (LogLines(), LogLines())
        let renderer = RecordingRenderer()
        var bobMedia = try Call.Media.synthetic(width: 160, height: 120)
        bobMedia.renderers = [renderer]
        let alice = try Call(options: try ConnectOptions(token: token("alice")) { $0.roomName = "lab" }, server: ("127.0.0.1", server.port),
                             media: try Call.Media.synthetic(width: 160, height: 120), duration: .seconds(20), log: aliceLog.sink)
        let bob = try Call(options: try ConnectOptions(token: token("bob")) { $0.roomName = "lab" }, server: ("127.0.0.1", server.port),
                           media: bobMedia, duration: .seconds(20), log: bobLog.sink)
        let done = DispatchGroup()
        for (call, name) in [(alice, "alice"), (bob, "bob")] {
            done.enter()
            startThread(named: name) {
                _ = try? call.run()
                done.leave()
            }
            #expect(eventually(15) { (name == "alice" ? aliceLog : bobLog).contains("joined room") })
        }
        defer {
            alice.stop()
            bob.stop()
            done.wait()
        }
        #expect(eventually(20) { renderer.frames > 10 }, "no call between alice and bob")
        // Mallory joins and speaks to both.
        var mallory = SignalingClientConfiguration(host: "127.0.0.1", port: server.port, room: "lab", token: { token("mallory") })
        mallory.backoffInitial = .milliseconds(50)
        let intruder = SignalingClient(configuration: mallory)
        intruder.start()
        defer { intruder.stop() }
        let offer = JSONValue.object(["type": .string("offer"), "sdp": .string("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n")])
        for target in ["alice", "bob"] {
            intruder.send(RelayMessage(kind: .offer, id: "", to: target, payload: offer))
            intruder.send(RelayMessage(kind: .answer, id: "", to: target, payload: offer))
            intruder.send(RelayMessage(kind: .candidate, id: "", to: target, payload: .object(["candidate": .string("candidate:1 1 UDP 1 192.0.2.1 9 typ host")])))
            intruder.send(RelayMessage(kind: .bye, id: "", to: target))
        }
        #expect(eventually(10) { aliceLog.contains("ignored offer from mallory") || aliceLog.contains("ignored answer from mallory") })
        #expect(eventually(10) { bobLog.contains("from mallory") })
        // The call goes on: more pictures, and neither side saw an end or a new round.
        let seen = renderer.frames
        #expect(eventually(10) { renderer.frames > seen + 30 }, "the call stopped after mallory spoke")
        for log in [aliceLog, bobLog] {
            #expect(!log.contains("to join again") && !log.contains("new session"), "\(log.lines.withLock { $0 })")
        }
    }
}
