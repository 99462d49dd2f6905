import Foundation
import Testing
@testable import Signaling

/// Drives the server state machine with lines and made-up time.
final class CoreHarness {
    let core: SignalingServerCore
    var now: Duration = .seconds(100)
    var wallClock: Int64 = 1_000_100

    init(limits: ServerLimits = ServerLimits(), iceServers: ICEServerPolicy? = nil) {
        core = SignalingServerCore(verifier: TokenVerifier(secret: testSecret), limits: limits, iceServers: iceServers)
    }

    func open(_ id: UInt64) -> [SignalingServerCore.Action] { core.connectionOpened(id, now: now) }

    func send(_ id: UInt64, _ message: SignalingMessage) -> [SignalingServerCore.Action] {
        core.received(Array(message.serialized().dropLast()), from: id, now: now, wallClock: wallClock)
    }

    func sendRaw(_ id: UInt64, _ text: String) -> [SignalingServerCore.Action] {
        core.received(Array(text.utf8), from: id, now: now, wallClock: wallClock)
    }

    func join(_ id: UInt64, identity: String, room: String = "lab", rejoin: Bool = false) -> [SignalingServerCore.Action] {
        _ = open(id)
        return send(id, .join(room: room, token: mint(identity: identity, room: room), rejoin: rejoin))
    }
}

func errorCode(_ actions: [SignalingServerCore.Action], to id: UInt64) -> SignalingErrorCode? {
    for case .send(id, .error(let code, _, _)) in actions { return code }
    return nil
}

@Suite struct ServerCoreTests {
    /// A participant's credential is renewed over its connection before it expires; the renewal
    /// serves a rejoin after the original's expiry, and nothing else.
    @Test func aConnectedParticipantsCredentialIsRenewedBeforeItExpires() throws {
        let h = CoreHarness()
        _ = h.open(1)
        let original = mint(identity: "a", issuedAt: h.wallClock, ttl: 60)  // expires at +60; renewed 20 s before
        #expect(h.send(1, .join(room: "lab", token: original, rejoin: false)).count == 1)
        h.wallClock += 39
        #expect(h.core.tick(now: h.now, wallClock: h.wallClock).isEmpty, "41 s left: not yet")
        h.wallClock += 1
        let actions = h.core.tick(now: h.now, wallClock: h.wallClock)
        guard case .send(1, .token(let renewed, let expires))? = actions.first, actions.count == 1 else {
            Issue.record("no renewal: \(actions)")
            return
        }
        #expect(expires == h.wallClock + 60, "the same lifetime again")
        let claims = try TokenVerifier(secret: testSecret).verify(renewed, room: "lab", now: h.wallClock)
        #expect(claims.identity == "a" && claims.room == "lab" && claims.renewal && claims.expires == expires)
        h.wallClock += 1
        #expect(h.core.tick(now: h.now, wallClock: h.wallClock).isEmpty, "renewed once, not every second")
        // The connection drops after the original expired (and its 10 s of leeway passed).
        h.wallClock += 30
        _ = h.core.connectionClosed(1)
        _ = h.open(2)
        #expect(errorCode(h.send(2, .join(room: "lab", token: original, rejoin: true)), to: 2) == .tokenExpired)
        #expect(errorCode(h.send(2, .join(room: "lab", token: renewed, rejoin: false)), to: 2) == .tokenRenewal,
                "a renewal is not a ticket for a fresh join")
        #expect(h.send(2, .join(room: "lab", token: renewed, rejoin: true)) == [.send(2, .joined(room: "lab", participant: "a", peers: []))])
        // The renewal is renewed in its turn while the participant stays.
        h.wallClock = expires - 20
        guard case .send(2, .token(_, let later))? = h.core.tick(now: h.now, wallClock: h.wallClock).first else {
            Issue.record("no second renewal")
            return
        }
        #expect(later == h.wallClock + 60)
        // Clients do not send credentials to the server this way.
        #expect(errorCode(h.send(2, .token(token: renewed, expires: later)), to: 2) == .badMessage)
        // Nobody joined on connection 3: nothing to renew there.
        _ = h.open(3)
        #expect(!h.core.tick(now: h.now, wallClock: h.wallClock + 1000).contains { if case .send(3, .token) = $0 { true } else { false } })
    }

    @Test func twoParticipantsJoinAndRelay() {
        let h = CoreHarness()
        #expect(h.join(1, identity: "a") == [.send(1, .joined(room: "lab", participant: "a", peers: []))])
        #expect(h.join(2, identity: "b") == [.send(2, .joined(room: "lab", participant: "b", peers: ["a"])),
                                             .send(1, .peerJoined(participant: "b", rejoin: false))])
        let offer = RelayMessage(kind: .offer, id: "o1", to: "b", payload: .object(["sdp": .string("x")]))
        var relayed = offer
        relayed.from = "a"
        #expect(h.send(1, .relay(offer)) == [.send(2, .relay(relayed)), .send(1, .ack(id: "o1"))])
        // `from` cannot be forged: the server writes it.
        var forged = RelayMessage(kind: .answer, id: "a1", from: "mallory")
        let actions = h.send(2, .relay(forged))
        forged.from = "b"
        #expect(actions == [.send(1, .relay(forged)), .send(2, .ack(id: "a1"))])
        #expect(h.core.connectionClosed(2) == [.send(1, .peerLeft(participant: "b", reason: "disconnected"))])
        #expect(h.core.roomCount == 1)
        #expect(h.core.connectionClosed(1) == [])
        #expect(h.core.roomCount == 0, "an empty room is removed")
    }

    @Test func roomFullAndReplacement() {
        let h = CoreHarness()
        _ = h.join(1, identity: "a")
        _ = h.join(2, identity: "b")
        #expect(errorCode(h.join(3, identity: "c"), to: 3) == .roomFull)
        // "a" again from connection 4: the old connection is told and closed; "b" sees nothing.
        let actions = h.join(4, identity: "a", rejoin: true)
        #expect(actions == [.send(1, .error(code: .replaced, message: "a joined again from another connection", id: nil)), .close(1),
                            .send(4, .joined(room: "lab", participant: "a", peers: ["b"]))])
        #expect(h.core.connectionClosed(1) == [], "the replaced connection closing is not a departure")
        #expect(h.core.participants(in: "lab") == ["b", "a"])
    }

    @Test func rejoinAfterLeavingIsAnnouncedAsRejoin() {
        let h = CoreHarness()
        _ = h.join(1, identity: "a")
        _ = h.join(2, identity: "b")
        _ = h.core.connectionClosed(2)
        #expect(h.join(3, identity: "b", rejoin: true).contains(.send(1, .peerJoined(participant: "b", rejoin: true))))
    }

    @Test func limitParticipantsIsConfigurable() {
        var limits = ServerLimits()
        limits.maxParticipantsPerRoom = 3
        let h = CoreHarness(limits: limits)
        for (id, name) in [(1, "a"), (2, "b"), (3, "c")] { #expect(errorCode(h.join(UInt64(id), identity: name), to: UInt64(id)) == nil) }
        #expect(errorCode(h.join(4, identity: "d"), to: 4) == .roomFull)
    }

    @Test func messagesOnlyReachTheirRoom() {
        let h = CoreHarness()
        _ = h.join(1, identity: "a", room: "one")
        _ = h.join(2, identity: "b", room: "two")
        #expect(errorCode(h.send(1, .relay(RelayMessage(kind: .offer, id: "1", to: "b"))), to: 1) == .unknownPeer)
        #expect(errorCode(h.send(1, .relay(RelayMessage(kind: .offer, id: "2"))), to: 1) == .unknownPeer)
    }

    @Test func flowErrors() {
        let h = CoreHarness()
        _ = h.open(1)
        #expect(errorCode(h.send(1, .relay(RelayMessage(kind: .offer, id: "1"))), to: 1) == .notJoined)
        #expect(errorCode(h.send(1, .join(room: "bad room!", token: mint(room: "bad room!"), rejoin: false)), to: 1) == .badRoom)
        #expect(errorCode(h.send(1, .join(room: "lab", token: mint(room: "other"), rejoin: false)), to: 1) == .tokenRoom)
        #expect(errorCode(h.send(1, .join(room: "lab", token: mint(issuedAt: 0, ttl: 10), rejoin: false)), to: 1) == .tokenExpired)
        #expect(errorCode(h.send(1, .join(room: "lab", token: mint(), rejoin: false)), to: 1) == nil)
        #expect(errorCode(h.send(1, .join(room: "lab", token: mint(), rejoin: false)), to: 1) == .alreadyJoined)
        #expect(errorCode(h.send(1, .ack(id: "1")), to: 1) == .badMessage)
        #expect(h.send(1, .ping(id: 9)) == [.send(1, .pong(id: 9))])
        #expect(errorCode(h.sendRaw(1, "GET / HTTP/1.1"), to: 1) == .badJSON)
        #expect(errorCode(h.sendRaw(1, #"{"type":"teleport"}"#), to: 1) == .unknownType)
    }

    @Test func expiryIsCheckedOnEveryJoin() {
        let h = CoreHarness()
        let token = mint(identity: "a", issuedAt: 1_000_000, ttl: 200)
        _ = h.open(1)
        #expect(errorCode(h.send(1, .join(room: "lab", token: token, rejoin: false)), to: 1) == nil)
        _ = h.core.connectionClosed(1)
        // The same token, presented again after it expired, is refused on the rejoin.
        _ = h.open(2)
        let later = h.core.received(Array(SignalingMessage.join(room: "lab", token: token, rejoin: true).serialized().dropLast()),
                                    from: 2, now: h.now, wallClock: 1_000_000 + 200 + 11)
        #expect(errorCode(later, to: 2) == .tokenExpired)
    }

    @Test func rateLimitClosesAFloodingConnection() {
        var limits = ServerLimits()
        limits.messagesPerSecond = 10
        limits.messageBurst = 20
        let h = CoreHarness(limits: limits)
        _ = h.join(1, identity: "a")
        var codes: [SignalingErrorCode] = []
        for _ in 0..<30 { if let code = errorCode(h.send(1, .ping(id: nil)), to: 1) { codes.append(code) } }
        #expect(codes.first == .rateLimited)
        // A well-behaved connection at 5 messages a second for 10 s is never limited.
        let g = CoreHarness(limits: limits)
        _ = g.join(1, identity: "a")
        for _ in 0..<50 {
            g.now += .milliseconds(200)
            #expect(g.send(1, .ping(id: 1)) == [.send(1, .pong(id: 1))])
        }
    }

    @Test func joinAndKeepaliveTimeouts() {
        let h = CoreHarness()
        _ = h.open(1)
        _ = h.join(2, identity: "a")
        h.now += .seconds(9)
        #expect(h.core.tick(now: h.now, wallClock: h.wallClock).isEmpty)
        h.now += .seconds(2)
        let actions = h.core.tick(now: h.now, wallClock: h.wallClock)
        #expect(errorCode(actions, to: 1) == .joinTimeout && actions.contains(.close(1)))
        #expect(!actions.contains(.close(2)))
        _ = h.core.connectionClosed(1)
        h.now += .seconds(15)
        _ = h.send(2, .ping(id: nil))
        h.now += .seconds(29)
        #expect(h.core.tick(now: h.now, wallClock: h.wallClock).isEmpty, "a ping keeps the connection alive")
        h.now += .seconds(2)
        #expect(errorCode(h.core.tick(now: h.now, wallClock: h.wallClock), to: 2) == .keepaliveTimeout)
    }

    @Test func connectionLimitAndLineLimit() {
        var limits = ServerLimits()
        limits.maxConnections = 2
        let h = CoreHarness(limits: limits)
        #expect(h.open(1).isEmpty && h.open(2).isEmpty)
        #expect(errorCode(h.open(3), to: 3) == .serverFull)
        #expect(h.core.lineTooLong(1).contains(.close(1)))
    }

    /// One address cannot hold more than its share; a closed connection gives its place back,
    /// and other addresses are not affected.
    @Test func connectionsPerAddressAreBounded() {
        var limits = ServerLimits()
        limits.maxConnectionsPerAddress = 3
        let h = CoreHarness(limits: limits)
        for id: UInt64 in 1...3 { #expect(h.core.connectionOpened(id, now: h.now, address: "198.51.100.7").isEmpty) }
        let refused = h.core.connectionOpened(4, now: h.now, address: "198.51.100.7")
        #expect(errorCode(refused, to: 4) == .addressLimit && refused.contains(.close(4)))
        #expect(h.core.connectionOpened(5, now: h.now, address: "2001:db8::1").isEmpty)
        #expect(h.core.connections(from: "198.51.100.7") == 3)
        _ = h.core.connectionClosed(4)  // refused: never counted
        #expect(h.core.connections(from: "198.51.100.7") == 3)
        _ = h.core.connectionClosed(2)
        #expect(h.core.connections(from: "198.51.100.7") == 2)
        #expect(h.core.connectionOpened(6, now: h.now, address: "198.51.100.7").isEmpty)
        for id: UInt64 in [1, 3, 5, 6] { _ = h.core.connectionClosed(id) }
        #expect(h.core.connections(from: "198.51.100.7") == 0 && h.core.connectionCount == 0)
    }
}
