import Foundation
@testable import SignalingService
import Testing
@testable import Signaling

/// Drives the server state machine with lines and made-up time.
final class CoreHarness {
    let core: SignalingServerCore
    var now: Duration = .seconds(100)
    var wallClock: Int64 = 1_000_100

    init(limits: ServerLimits = ServerLimits(), iceServers: ICEServerPolicy? = nil) {
        var seats = 0
        core = SignalingServerCore(verifier: TokenVerifier(secret: testSecret), limits: limits, iceServers: iceServers) {
            seats += 1
            return "seat-\(seats)"
        }
    }

    func close(_ id: UInt64) -> [SignalingServerCore.Action] { core.connectionClosed(id, now: now) }

    func tick() -> [SignalingServerCore.Action] { core.tick(now: now, wallClock: wallClock) }

    /// The renewal sent on `id` among `actions`.
    func renewal(_ actions: [SignalingServerCore.Action], to id: UInt64) -> (token: String, expires: Int64)? {
        for case .send(id, .token(let token, let expires, _)) in actions { return (token, expires) }
        return nil
    }

    func open(_ id: UInt64) -> [SignalingServerCore.Action] { core.connectionOpened(id, now: now) }

    func send(_ id: UInt64, _ message: SignalingMessage) -> [SignalingServerCore.Action] {
        core.received(Array(message.serialized().dropLast()), from: id, now: now, wallClock: wallClock)
    }

    func sendRaw(_ id: UInt64, _ text: String) -> [SignalingServerCore.Action] {
        core.received(Array(text.utf8), from: id, now: now, wallClock: wallClock)
    }

    func join(_ id: UInt64, identity: String, room: String = "lab", rejoin: Bool = false, token: String? = nil) -> [SignalingServerCore.Action] {
        _ = open(id)
        return send(id, .join(room: room, token: token ?? mint(identity: identity, room: room), rejoin: rejoin))
    }
}

func errorCode(_ actions: [SignalingServerCore.Action], to id: UInt64) -> SignalingErrorCode? {
    for case .send(id, .error(let code, _, _)) in actions { return code }
    return nil
}

@Suite struct ServerCoreTests {
    /// A token minted with PyJWT's defaults has no iat: its renewals live what it had left when
    /// it was presented, not `exp - 0` (57 years, as an earlier rule read it).
    @Test func aTokenWithoutIssuedAtIsRenewedForNoLongerThanItHad() throws {
        let h = CoreHarness()
        _ = h.open(1)
        let token = signedPayload(#"{"sub":"roof","room":"lab","exp":\#(h.wallClock + 20)}"#)
        #expect(h.send(1, .join(room: "lab", token: token, rejoin: false)) == [.send(1, .joined(room: "lab", participant: "roof", peers: []))])
        var renewed: (token: String, expires: Int64)?
        for _ in 0..<20 where renewed == nil {
            h.wallClock += 1
            renewed = h.renewal(h.tick(), to: 1)
        }
        let (token2, expires) = try #require(renewed)
        #expect(expires - h.wallClock <= 20, "renewed for \(expires - h.wallClock) s")
        #expect(expires - h.wallClock == 20, "and for what it had: the call goes on")
        let claims = try TokenVerifier(secret: testSecret).verify(token2, room: "lab", now: h.wallClock)
        #expect(claims.renewal && claims.seat == "seat-1" && claims.expires == expires)
        // Its own renewal, in turn, for the same 20 s again.
        h.wallClock = expires - 3
        #expect(h.renewal(h.tick(), to: 1)?.expires == h.wallClock + 20)
    }

    /// However long a token lives, a renewal lives at most the service's maximum.
    @Test func renewalsLiveAtMostTheServiceMaximum() throws {
        var limits = ServerLimits()
        limits.maxTokenLifetime = 3600
        let h = CoreHarness(limits: limits)
        _ = h.join(1, identity: "a", token: mint(identity: "a", issuedAt: h.wallClock, ttl: 30 * 86_400))
        h.wallClock += 30 * 86_400 - 299
        let renewed = try #require(h.renewal(h.tick(), to: 1))
        #expect(renewed.expires == h.wallClock + 3600)
        // A token presented at its very end (within the skew allowed) grants nothing to renew.
        let g = CoreHarness()
        _ = g.join(1, identity: "a", token: mint(identity: "a", issuedAt: g.wallClock - 100, ttl: 95))
        for _ in 0..<30 {
            g.wallClock += 1
            #expect(g.renewal(g.tick(), to: 1) == nil)
        }
    }

    /// A renewal takes back its own seat: while the seat is held, or within the grace after its
    /// connection was lost. After the grace, for any other seat, or as a fresh join elsewhere,
    /// it is refused; the rejoin flag a client sends changes nothing.
    @Test func aRenewalTakesBackItsOwnSeatOnlyWithinTheGrace() throws {
        let h = CoreHarness()
        let original = mint(identity: "a", issuedAt: h.wallClock, ttl: 60)
        _ = h.join(1, identity: "a", token: original)
        _ = h.join(2, identity: "b")
        h.wallClock += 45
        let renewed = try #require(h.renewal(h.tick(), to: 1))
        #expect(h.tick().isEmpty, "renewed once, not every second")
        #expect(h.close(1) == [.send(2, .peerLeft(participant: "a", reason: "disconnected"))])
        // Back within the grace, without the rejoin hint: the seat and the room take it.
        h.now += .seconds(30)
        h.wallClock += 30
        #expect(h.join(3, identity: "a", token: renewed.token) == [.send(3, .joined(room: "lab", participant: "a", peers: ["b"])),
                                                                   .send(2, .peerJoined(participant: "a", rejoin: true))])
        _ = h.close(3)
        // Past the grace the seat is gone, and the renewal with it, rejoin flag or not.
        h.now += limits(h).seatGrace + .seconds(1)
        _ = h.tick()
        #expect(h.core.seatCount(in: "lab") == 1)
        #expect(errorCode(h.join(4, identity: "a", rejoin: true, token: renewed.token), to: 4) == .tokenRenewal)
        // A renewal for a seat the service never named is refused too.
        var forged = TokenClaims(identity: "b", room: "lab", issuedAt: h.wallClock, expires: h.wallClock + 60)
        forged.renewal = true
        forged.seat = "seat-1"
        #expect(errorCode(h.join(5, identity: "b", token: TokenIssuer(secret: testSecret).mint(forged)), to: 5) == .tokenRenewal)
        // The refusals changed nothing: b still holds its seat on connection 2.
        #expect(h.core.participants(in: "lab") == ["b"])
        #expect(errorCode(h.send(2, .relay(RelayMessage(kind: .offer, id: "x", to: "a"))), to: 2) == .unknownPeer)
    }

    func limits(_ h: CoreHarness) -> ServerLimits { h.core.limits }

    /// A live seat goes to a new connection only with the token that holds it or the seat's
    /// renewal (its own client, reconnected before the old connection timed out); another token
    /// of the same identity is told to wait, and nothing else changes. The room hears of a seat
    /// that changes hands.
    @Test func aLiveSeatGoesOnlyToItsOwnCredential() throws {
        let h = CoreHarness()
        let first = mint(identity: "a", issuedAt: h.wallClock, ttl: 600)
        _ = h.join(1, identity: "a", token: first)
        _ = h.join(2, identity: "b")
        let other = mint(identity: "a", issuedAt: h.wallClock + 1, ttl: 600)
        let refused = h.join(3, identity: "a", token: other)
        #expect(refused.count == 1 && errorCode(refused, to: 3) == .seatTaken, "\(refused)")
        #expect(h.core.participants(in: "lab") == ["a", "b"])
        // The holder's own token: the new connection takes the seat; the old one is told, b hears.
        #expect(h.join(4, identity: "a", token: first) == [
            .send(1, .error(code: .replaced, message: "a joined again from another connection", id: nil)), .close(1),
            .send(4, .joined(room: "lab", participant: "a", peers: ["b"])), .send(2, .peerJoined(participant: "a", rejoin: true))])
        #expect(h.close(1) == [], "the replaced connection closing is not a departure")
        // The seat's renewal does the same.
        h.wallClock += 590
        let renewed = try #require(h.renewal(h.tick(), to: 4))
        let taken = h.join(5, identity: "a", token: renewed.token)
        #expect(taken.contains(.close(4)) && taken.contains(.send(2, .peerJoined(participant: "a", rejoin: true))))
        #expect(h.core.participants(in: "lab") == ["b", "a"])
    }

    /// A seat within its grace counts toward the room; another token of the identity takes it
    /// back as a new seat, and the old seat's renewals stop working.
    @Test func aSeatInItsGraceHoldsItsPlace() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "a", token: mint(identity: "a", issuedAt: h.wallClock, ttl: 30))
        _ = h.join(2, identity: "b")
        h.wallClock += 25
        let renewed = try #require(h.renewal(h.tick(), to: 1))
        _ = h.close(1)
        #expect(errorCode(h.join(3, identity: "c"), to: 3) == .roomFull, "a's seat waits for a")
        let fresh = mint(identity: "a", issuedAt: h.wallClock, ttl: 600)
        #expect(h.join(4, identity: "a", token: fresh).contains(.send(4, .joined(room: "lab", participant: "a", peers: ["b"]))))
        _ = h.close(4)
        #expect(errorCode(h.join(5, identity: "a", token: renewed.token), to: 5) == .tokenRenewal, "the old seat's renewal")
        h.now += h.core.limits.seatGrace + .seconds(1)
        _ = h.tick()
        #expect(errorCode(h.join(6, identity: "c"), to: 6) == nil, "the grace over, the seat is free")
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
        #expect(h.close(2) == [.send(1, .peerLeft(participant: "b", reason: "disconnected"))])
        #expect(h.core.roomCount == 1)
        #expect(h.close(1) == [])
        #expect(h.core.roomCount == 0, "a room with no connection is removed")
    }

    @Test func rejoinAfterLeavingIsAnnouncedAsRejoin() {
        let h = CoreHarness()
        _ = h.join(1, identity: "a")
        _ = h.join(2, identity: "b")
        _ = h.close(2)
        #expect(h.join(3, identity: "b").contains(.send(1, .peerJoined(participant: "b", rejoin: true))), "the service knows; no hint needed")
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
        #expect(errorCode(h.send(1, .token(token: "x", expires: 1)), to: 1) == .badMessage, "clients do not send credentials this way")
        #expect(h.send(1, .ping(id: 9)) == [.send(1, .pong(id: 9))])
        #expect(errorCode(h.sendRaw(1, "GET / HTTP/1.1"), to: 1) == .badJSON)
        #expect(errorCode(h.sendRaw(1, #"{"type":"teleport"}"#), to: 1) == .unknownType)
    }

    @Test func expiryIsCheckedOnEveryJoin() {
        let h = CoreHarness()
        let token = mint(identity: "a", issuedAt: 1_000_000, ttl: 200)
        _ = h.open(1)
        #expect(errorCode(h.send(1, .join(room: "lab", token: token, rejoin: false)), to: 1) == nil)
        _ = h.close(1)
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
        #expect(h.tick().isEmpty)
        h.now += .seconds(2)
        let actions = h.tick()
        #expect(errorCode(actions, to: 1) == .joinTimeout && actions.contains(.close(1)))
        #expect(!actions.contains(.close(2)))
        _ = h.close(1)
        h.now += .seconds(15)
        _ = h.send(2, .ping(id: nil))
        h.now += .seconds(29)
        #expect(h.tick().isEmpty, "a ping keeps the connection alive")
        h.now += .seconds(2)
        #expect(errorCode(h.tick(), to: 2) == .keepaliveTimeout)
    }

    @Test func connectionLimitAndLineLimit() {
        var limits = ServerLimits()
        limits.maxConnections = 2
        let h = CoreHarness(limits: limits)
        #expect(h.open(1).isEmpty && h.open(2).isEmpty)
        #expect(errorCode(h.open(3), to: 3) == .serverFull)
        #expect(h.core.lineTooLong(1).contains(.close(1)))
    }

    /// One address block cannot hold more than its share; a closed connection gives its place
    /// back, and other blocks are not affected.
    @Test func connectionsPerAddressAreBounded() {
        var limits = ServerLimits()
        limits.maxConnectionsPerAddress = 3
        let h = CoreHarness(limits: limits)
        for id: UInt64 in 1...3 { #expect(h.core.connectionOpened(id, now: h.now, address: "198.51.100.7").isEmpty) }
        let refused = h.core.connectionOpened(4, now: h.now, address: "198.51.100.7")
        #expect(errorCode(refused, to: 4) == .addressLimit && refused.contains(.close(4)))
        #expect(h.core.connectionOpened(5, now: h.now, address: "2001:db8::/64").isEmpty)
        #expect(h.core.connections(from: "198.51.100.7") == (3, 3))
        _ = h.close(4)  // refused: never counted
        #expect(h.core.connections(from: "198.51.100.7") == (3, 3))
        _ = h.close(2)
        #expect(h.core.connections(from: "198.51.100.7") == (2, 2))
        #expect(h.core.connectionOpened(6, now: h.now, address: "198.51.100.7").isEmpty)
        for id: UInt64 in [1, 3, 5, 6] { _ = h.close(id) }
        #expect(h.core.connections(from: "198.51.100.7") == (0, 0) && h.core.connectionCount == 0)
    }

    /// Connections that have not joined are few per block: one host (or one IPv6 /64, whatever
    /// addresses it picks in it) holding connections open without a token cannot fill the
    /// service; joined ones, many endpoints behind one NAT, are many.
    @Test func pendingConnectionsPerBlockAreFew() {
        var limits = ServerLimits()
        limits.maxPendingPerAddress = 4
        let h = CoreHarness(limits: limits)
        let block = AddressBlock.of("2001:db8:7:9::1")
        for id: UInt64 in 1...4 { #expect(h.core.connectionOpened(id, now: h.now, address: AddressBlock.of("2001:db8:7:9::\(id)")).isEmpty) }
        #expect(errorCode(h.core.connectionOpened(5, now: h.now, address: AddressBlock.of("2001:db8:7:9:ffff::5")), to: 5) == .addressLimit)
        #expect(h.core.connectionOpened(6, now: h.now, address: AddressBlock.of("2001:db8:7:a::1")).isEmpty, "the next /64 is another host")
        // A join frees its pending place: the host may have more joined connections than that.
        #expect(errorCode(h.send(1, .join(room: "lab", token: mint(identity: "a"), rejoin: false)), to: 1) == nil)
        #expect(h.core.connections(from: block) == (4, 3))
        #expect(h.core.connectionOpened(7, now: h.now, address: block).isEmpty)
        _ = h.close(1)
        #expect(h.core.connections(from: block) == (4, 4))
    }

    @Test func addressBlocks() {
        #expect(AddressBlock.of("198.51.100.7") == "198.51.100.7")
        #expect(AddressBlock.of("2001:db8:7:9:1:2:3:4") == "2001:db8:7:9::/64")
        #expect(AddressBlock.of("2001:0db8:0007:0009::ffff") == "2001:db8:7:9::/64")
        #expect(AddressBlock.of("::ffff:198.51.100.7") == "198.51.100.7", "IPv4-mapped is IPv4")
        #expect(AddressBlock.of("::1") == "0:0:0:0::/64")
        #expect(AddressBlock.of("not an address") == "not an address")
    }
}

/// A token signed with the test secret around any payload, claims checked or not.
func signedPayload(_ payload: String) -> String {
    let input = b64(#"{"alg":"HS256","typ":"JWT"}"#) + "." + b64(payload)
    return input + "." + Base64URL.encode(Crypto.hmacSHA256(key: testSecret.bytes, data: Array(input.utf8)))
}

/// The core with its rooms in a directory: requests go out as actions, answers come back later.
@Suite struct ClusteredCoreTests {
    /// A peer can hear of a seat and send to it before this node has the directory's answer
    /// (the two come over different Redis connections): what arrives for the participant
    /// meanwhile is delivered once it is seated, after its `joined`.
    @Test func messagesForAParticipantBeingSeatedWaitForItsSeat() throws {
        let core = SignalingServerCore(verifier: TokenVerifier(secret: testSecret), clustered: true) { "seat-1" }
        let now = Duration.seconds(100), wall: Int64 = 1_000_100
        _ = core.connectionOpened(1, now: now)
        let join = core.received(Array(SignalingMessage.join(room: "lab", token: mint(identity: "b"), rejoin: false).serialized().dropLast()),
                                 from: 1, now: now, wallClock: wall)
        guard case .directory(let request)? = join.first, case .join = request.work else { Issue.record("no join request: \(join)"); return }
        let offer = RelayMessage(kind: .offer, id: "o1", from: "a", to: "b")
        let line = String(decoding: SignalingMessage.relay(offer).serialized().dropLast(), as: UTF8.self)
        #expect(core.clusterEvents([ClusterEvent(kind: .relay, room: "lab", to: "b", who: "a", detail: line)]).isEmpty, "delivered to nobody yet")
        let seated = core.directoryAnswered(request.id, .joined(.seated(seat: "seat-1", grant: 3600, holder: [], previous: .none), peers: ["a"]),
                                            now: now, wallClock: wall)
        #expect(seated == [.send(1, .joined(room: "lab", participant: "b", peers: ["a"])), .send(1, .relay(offer))])
        // A join the directory refuses drops what waited for it.
        _ = core.connectionOpened(2, now: now)
        let second = core.received(Array(SignalingMessage.join(room: "lab", token: mint(identity: "c"), rejoin: false).serialized().dropLast()),
                                   from: 2, now: now, wallClock: wall)
        guard case .directory(let full)? = second.first else { Issue.record("no join request"); return }
        _ = core.clusterEvents([ClusterEvent(kind: .relay, room: "lab", to: "c", who: "a", detail: line)])
        let refused = core.directoryAnswered(full.id, .joined(.full, peers: []), now: now, wallClock: wall)
        #expect(refused.count == 1 && errorCode(refused, to: 2) == .roomFull, "\(refused)")
    }
}
