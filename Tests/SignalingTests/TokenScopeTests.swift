import Foundation
@testable import SignalingService
import Testing
@testable import Signaling

/// Every credential does only what it was minted for: the scopes of its claim `can`, a renewal
/// that is never a bearer, a token for every room that is not renewed, and quotas per identity.
@Suite struct TokenScopeTests {
    func request(_ method: String, _ kind: WebRTCHTTPKind, room: String = "lab", session: String? = nil, token: String?) -> WebRTCHTTPRequest {
        WebRTCHTTPRequest(method: method, kind: kind, room: room, session: session, bearerToken: token, contentType: "application/sdp",
                          body: WebRTCHTTPCoreTests.offer)
    }

    func post(_ h: CoreHarness, _ id: UInt64, _ kind: WebRTCHTTPKind, room: String = "lab", token: String) -> (status: Int?, offered: Bool) {
        _ = h.open(id)
        let actions = h.core.webRTCHTTP(id, request("POST", kind, room: room, token: token), now: h.now, wallClock: h.wallClock)
        var status: Int?
        for case .respond(id, let reply) in actions { status = reply.status }
        let offered = actions.contains { if case .send(_, .relay(let m)) = $0 { return m.kind == .offer }; return false }
        return (status, offered)
    }

    @Test func theClaimSaysWhatATokenAllows() throws {
        let verifier = TokenVerifier(secret: testSecret)
        #expect(try verifier.verify(mint(can: [.watch, .publish]), room: "lab", now: 1_000_100).can == [.watch, .publish])
        // A token that names nothing (minted by other tools, or before scopes) joins, and only that.
        let plain = TokenIssuer(secret: testSecret).sign(payload: Array(#"{"sub":"a","room":"lab","exp":1000500}"#.utf8))
        #expect(try verifier.verify(plain, room: "lab", now: 1_000_100).can == .join)
        // Names this service does not know grant nothing; a claim that is not a list of names is refused.
        let unknown = TokenIssuer(secret: testSecret).sign(payload: Array(#"{"sub":"a","room":"lab","exp":1000500,"can":["admin"]}"#.utf8))
        #expect(try verifier.verify(unknown, room: "lab", now: 1_000_100).can.isEmpty)
        let odd = TokenIssuer(secret: testSecret).sign(payload: Array(#"{"sub":"a","room":"lab","exp":1000500,"can":"join"}"#.utf8))
        expectRejection(odd, .tokenMalformed)
        #expect(TokenScope(names: "join,watch") == [.join, .watch] && TokenScope(names: "join,admin") == nil && TokenScope(names: "") == nil)
    }

    /// A watch-only token watches, and cannot join as a peer or publish; a publish-only one the
    /// reverse; a join token (the default) neither watches nor publishes.
    @Test func aWatchOnlyTokenWatchesAndDoesNothingElse() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof")
        let watch = mint(identity: "phone", can: .watch)
        #expect(post(h, 10, .whep, token: watch) == (nil, true), "it watches")
        #expect(post(h, 11, .whip, token: watch).status == 403, "it does not publish")
        #expect(errorCode(h.join(12, identity: "phone", token: watch), to: 12) == .tokenScope, "it does not take a seat")
        let publish = mint(identity: "camera", can: .publish)
        #expect(post(h, 13, .whip, token: publish) == (nil, true))
        #expect(post(h, 14, .whep, token: publish).status == 403)
        let join = mint(identity: "laptop")
        #expect(post(h, 15, .whep, token: join).status == 403 && post(h, 16, .whip, token: join).status == 403)
        #expect(errorCode(h.join(17, identity: "laptop", token: join), to: 17) == nil)
        #expect(SignalingErrorCode.tokenScope.isFatalForJoin)
    }

    /// A renewal takes back its seat and is never a bearer: before, a renewal of a "*" token was
    /// taken as a WHEP bearer for another room, long after the original expired.
    @Test func aRenewalIsNeverABearer() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof")
        _ = h.join(2, identity: "phone", token: mint(identity: "phone", issuedAt: h.wallClock, ttl: 60, can: [.join, .watch]))
        h.wallClock += 45
        let renewed = try #require(h.renewal(h.tick(), to: 2))
        #expect(post(h, 10, .whep, token: renewed.token).status == 401)
        #expect(post(h, 11, .whip, token: renewed.token).status == 401)
        let claims = try TokenVerifier(secret: testSecret).verify(renewed.token, room: "lab", now: h.wallClock)
        #expect(claims.can == .join, "a renewal allows taking back the seat, nothing more")
    }

    /// A token for every room is not renewed, and its holder's session ends when it expires.
    @Test func aWildcardTokenIsNotRenewedAndItsSessionEndsWithIt() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof", token: mint(identity: "roof", room: "*", issuedAt: h.wallClock, ttl: 30))
        _ = h.join(2, identity: "peer")
        var ended: [SignalingServerCore.Action] = []
        for _ in 0..<60 {
            h.wallClock += 1
            h.now += .seconds(1)
            let actions = h.tick()
            #expect(h.renewal(actions, to: 1) == nil, "a '*' token is never renewed")
            if actions.contains(.close(1)) { ended = actions; break }
            _ = h.send(1, .ping(id: 1))
            _ = h.send(2, .ping(id: 1))
        }
        #expect(errorCode(ended, to: 1) == .tokenExpired, "\(ended)")
        #expect(h.wallClock <= 1_000_100 + 30 + 10 + 1, "at its expiry, past the skew allowed")
    }

    /// Each renewal lives what the original token had left when it was presented, never more:
    /// the grant does not grow with renewals.
    @Test func aRenewalNeverOutlivesTheOriginalGrant() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "a", token: mint(identity: "a", issuedAt: h.wallClock - 20, ttl: 50))  // 30 s left: the grant
        var last: Int64 = h.wallClock + 30
        for _ in 0..<5 {
            var renewed: (token: String, expires: Int64)?
            while renewed == nil {
                h.wallClock += 1
                h.now += .seconds(1)
                renewed = h.renewal(h.tick(), to: 1)
                _ = h.send(1, .ping(id: 1))
            }
            let claims = try TokenVerifier(secret: testSecret).verify(renewed!.token, room: "lab", now: h.wallClock)
            #expect(claims.expires - (claims.issuedAt ?? 0) <= 30 && claims.expires > last - 30, "\(claims)")
            last = claims.expires
        }
    }

    /// One identity holds at most `maxSessionsPerIdentity` WHIP/WHEP sessions in all rooms: one
    /// "*" token opened all 256 before, and a viewer of another room got 503.
    @Test func oneIdentitysSessionsAreCappedInAllRooms() throws {
        var limits = ServerLimits()
        limits.maxSessionsPerIdentity = 3
        let h = CoreHarness(limits: limits)
        for (id, room) in [(UInt64(1), "lab"), (2, "roof"), (3, "bench")] {
            _ = h.join(id, identity: "endpoint-\(room)", room: room)
        }
        let wildcard = mint(identity: "greedy", room: "*", can: .watch)
        var results: [Int?] = []
        for (i, room) in ["lab", "roof", "bench", "lab", "roof"].enumerated() {
            results.append(post(h, 10 + UInt64(i), .whep, room: room, token: wildcard).status)
        }
        #expect(results == [nil, nil, nil, 429, 429], "\(results)")
        // Another identity is not held back by the first one's sessions.
        #expect(post(h, 20, .whep, room: "bench", token: mint(identity: "viewer", room: "bench", can: .watch)) == (nil, true))
    }

    /// A session ends with its token, and at the service's maximum lifetime, whichever is first.
    @Test func aSessionLivesAtMostTheConfiguredMaximum() throws {
        var limits = ServerLimits()
        limits.maxSessionLifetime = 120
        let h = CoreHarness(limits: limits)
        _ = h.join(1, identity: "roof")
        #expect(post(h, 10, .whep, token: mint(identity: "phone", issuedAt: h.wallClock, ttl: 3600, can: .watch)).offered)
        #expect(h.core.webRTCHTTPSessionCount == 1)
        h.wallClock += 119
        _ = h.tick()
        #expect(h.core.webRTCHTTPSessionCount == 1)
        h.wallClock += 2
        let ended = h.tick()
        #expect(h.core.webRTCHTTPSessionCount == 0)
        #expect(ended.contains { if case .send(1, .relay(let bye)) = $0 { return bye.kind == .bye }; return false }, "the endpoint hears the session ended")
    }

    /// Extensions a token says must be understood are refused (RFC 7515 §4.1.11); what the
    /// header says of its algorithm is not echoed (it reaches the service's log).
    @Test func criticalExtensionsAreRefusedAndTheHeaderIsNotEchoed() throws {
        func token(header: String) -> String {
            let payload = b64(#"{"sub":"a","room":"lab","exp":1000500}"#)
            let input = b64(header) + "." + payload
            return input + "." + Base64URL.encode(Crypto.hmacSHA256(key: Array("0123456789abcdef0123456789abcdef-test".utf8), data: Array(input.utf8)))
        }
        expectRejection(token(header: #"{"alg":"HS256","typ":"JWT","crit":["exp"],"exp":1}"#), .tokenMalformed)
        do {
            _ = try TokenVerifier(secret: testSecret).verify(token(header: "{\"alg\":\"x\\n<3>forged\"}"), room: "lab", now: 1_000_100)
            Issue.record("an unknown algorithm was accepted")
        } catch {
            #expect(error.code == .tokenAlgorithm && !error.message.contains("forged") && !error.message.contains("\n"), "\(error.message)")
        }
    }

    /// Identities are kept in one form (NFC) and compared as bytes after that: a token for
    /// "e\u{301}" is the identity "é", what Redis's scripts compare byte by byte; a relay to
    /// either form reaches it; an identity with control characters is refused.
    @Test func identitiesHaveOneCanonicalForm() throws {
        let verifier = TokenVerifier(secret: testSecret)
        let decomposed = try verifier.verify(mint(identity: "Jose\u{301}"), room: "lab", now: 1_000_100)
        #expect(Array(decomposed.identity.utf8) == Array("José".utf8), "\(Array(decomposed.identity.utf8))")
        #expect(CanonicalName.of("plain") == "plain" && CanonicalName.of("Å") == "\u{C5}")
        expectRejection(mint(identity: "x\n<3>forged"), .tokenMalformed)
        expectRejection(mint(identity: "bell\u{7}"), .tokenMalformed)
        let h = CoreHarness()
        _ = h.join(1, identity: "José", token: mint(identity: "Jose\u{301}"))
        _ = h.join(2, identity: "b")
        #expect(h.core.participants(in: "lab").map { Array($0.utf8) } == [Array("José".utf8), Array("b".utf8)])
        let sent = h.send(2, .relay(RelayMessage(kind: .offer, id: "o", to: "Jose\u{301}")))
        #expect(sent.contains { if case .send(1, .relay(let m)) = $0 { return m.from == "b" }; return false }, "\(sent)")
        // The other form of the same name is the same identity: its seat is held, live.
        #expect(errorCode(h.join(3, identity: "José", token: mint(identity: "José", issuedAt: 1_000_050)), to: 3) == .seatTaken)
    }
}
