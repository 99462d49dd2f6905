import Foundation
@testable import SignalingService
import Testing
@testable import Signaling

/// WHIP/WHEP sessions in the service's state machine: what the endpoint hears, what the HTTP
/// client gets, and every refusal.
@Suite struct WebRTCHTTPCoreTests {
    static let offer = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"

    func request(_ method: String, _ kind: WebRTCHTTPKind = .whep, room: String = "lab", session: String? = nil, token: String? = mint(identity: "phone", can: [.watch, .publish]),
                 type: String? = "application/sdp", ifMatch: String? = nil, body: String = offer) -> WebRTCHTTPRequest {
        WebRTCHTTPRequest(method: method, kind: kind, room: room, session: session, bearerToken: token, contentType: type, ifMatch: ifMatch, body: body)
    }

    func http(_ h: CoreHarness, _ id: UInt64, _ request: WebRTCHTTPRequest) -> [SignalingServerCore.Action] {
        _ = h.open(id)
        return h.core.webRTCHTTP(id, request, now: h.now, wallClock: h.wallClock)
    }

    func reply(_ actions: [SignalingServerCore.Action], to id: UInt64) -> HTTPReply? {
        for case .respond(id, let reply) in actions { return reply }
        return nil
    }

    func relayed(_ actions: [SignalingServerCore.Action], to id: UInt64) -> RelayMessage? {
        for case .send(id, .relay(let message)) in actions { return message }
        return nil
    }

    /// An endpoint in room lab (connection 1) and a POST answered by it: the session's ID and the 201.
    func session(_ h: CoreHarness, kind: WebRTCHTTPKind = .whep) throws -> (id: String, name: String, created: HTTPReply) {
        _ = h.join(1, identity: "roof")
        let offered = try #require(relayed(http(h, 10, request("POST", kind)), to: 1))
        #expect(offered.kind == .offer && offered.to == "roof" && offered.payload["via"]?.stringValue == kind.rawValue && offered.payload["sdp"]?.stringValue == Self.offer)
        let name = try #require(offered.from)
        let answer = RelayMessage(kind: .answer, id: "a1", to: name, payload: .object(["type": .string("answer"), "sdp": .string("v=0 answer")]))
        let created = try #require(reply(h.send(1, .relay(answer)), to: 10))
        return (String(name.split(separator: "~")[1]), name, created)
    }

    @Test func aPostBecomesAnOfferToTheEndpointAndItsAnswerA201() throws {
        let h = CoreHarness(iceServers: ICEServerPolicy(stunURLs: ["stun:192.0.2.1:3478"], turnURLs: ["turn:192.0.2.1:3478?transport=udp"], turnSecret: Array("turn".utf8)))
        let (id, name, created) = try session(h)
        #expect(name == "whep~\(id)" && id.count == 24)
        #expect(created.status == 201 && created.body == "v=0 answer" && created.contentType == "application/sdp")
        let fields = Dictionary(created.fields.map { ($0.name, $0.value) }, uniquingKeysWith: { a, b in a + " | " + b })
        #expect(fields["Location"] == "/whep/lab/\(id)" && fields["ETag"]?.hasPrefix("\"") == true)
        // Per-session TURN credentials, no longer than the bearer token: they name the room and the session.
        let links = LinkField.iceServers(LinkField.parse(created.fields.filter { $0.name == "Link" }.map(\.value)))
        #expect(links.count == 2 && links[0].urls == ["stun:192.0.2.1:3478"])
        #expect(links[1].username == "\(1_000_000 + 3600):lab:\(name)" && links[1].credential?.isEmpty == false)
        #expect(h.core.webRTCHTTPSessionCount == 1)
    }

    @Test func patchTrickles204AndRestarts200AndDeleteSaysBye() throws {
        let h = CoreHarness()
        let (id, name, created) = try session(h)
        let etag = try #require(created.fields.first { $0.name == "ETag" }?.value)
        let fragment = ICEFragment(ufrag: "abcd", password: "0123456789012345678901", mid: "0", candidates: ["candidate:1 1 udp 1 192.0.2.9 5000 typ host"], endOfCandidates: true).serialized
        let patched = http(h, 11, request("PATCH", session: id, type: ICEFragment.contentType, ifMatch: etag, body: fragment))
        #expect(reply(patched, to: 11)?.status == 204)
        let candidates = patched.compactMap { action -> RelayMessage? in if case .send(1, .relay(let m)) = action { return m }; return nil }
        #expect(candidates.map(\.kind) == [.candidate, .candidate] && candidates.allSatisfy { $0.from == name })
        #expect(Set(candidates.map(\.id)).count == 2, "each message its own ID: a client drops a sender's repeated ID as a copy")
        #expect(candidates[0].payload["candidate"]?.stringValue == "candidate:1 1 udp 1 192.0.2.9 5000 typ host" && candidates[1].payload["candidate"]?.stringValue == "")
        // An ICE restart waits for the endpoint's answer, then gets its fragment and a new ETag.
        let restart = http(h, 12, request("PATCH", session: id, type: ICEFragment.contentType, ifMatch: "\"*\"", body: fragment))
        #expect(reply(restart, to: 12) == nil)
        let asked = try #require(relayed(restart, to: 1))
        #expect(asked.kind == .offer && asked.payload["iceRestart"]?["ufrag"]?.stringValue == "abcd")
        let theirs = ICEFragment(ufrag: "wxyz", password: "9876543210987654321098", candidates: ["candidate:2 1 udp 1 192.0.2.8 6000 typ host"]).serialized
        let answered = try #require(reply(h.send(1, .relay(RelayMessage(kind: .answer, id: "a2", to: name, payload: .object(["sdp": .string(theirs)])))), to: 12))
        #expect(answered.status == 200 && answered.contentType == ICEFragment.contentType)
        #expect(try ICEFragment(parsing: answered.body).ufrag == "wxyz" && answered.fields.first { $0.name == "ETag" }?.value != etag)
        let deleted = http(h, 13, request("DELETE", session: id, type: nil, body: ""))
        #expect(reply(deleted, to: 13)?.status == 200 && relayed(deleted, to: 1)?.kind == .bye)
        #expect(h.core.webRTCHTTPSessionCount == 0)
        #expect(reply(http(h, 14, request("DELETE", session: id, type: nil, body: "")), to: 14)?.status == 404)
    }

    @Test(arguments: [
        // method, session?, token, content type, If-Match, body, status
        ("PUT", false, "phone", "application/sdp", nil, offer, 405),
        ("POST", false, "", "application/sdp", nil, offer, 401),
        ("POST", false, "garbage", "application/sdp", nil, offer, 401),
        ("POST", false, "other-room", "application/sdp", nil, offer, 403),
        ("POST", false, "phone", "text/plain", nil, offer, 415),
        ("POST", false, "phone", "application/sdp", nil, "not sdp", 422),
        ("POST", false, "phone", "application/sdp", nil, "v=0\r\n\u{1}\u{1}\u{1}", 422),
        ("PATCH", true, "phone", "application/sdp", nil, "a=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\n", 415),
        ("PATCH", true, "phone", ICEFragment.contentType, "\"stale\"", "a=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\n", 412),
        ("PATCH", true, "phone", ICEFragment.contentType, nil, "a=candidate:1 1 udp 1 192.0.2.9 5000 typ host\r\n", 422),
        ("PATCH", true, "intruder", ICEFragment.contentType, nil, "a=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\n", 403),
        ("DELETE", true, "intruder", nil, nil, "", 403),
        ("POST", true, "phone", "application/sdp", nil, offer, 405),
    ] as [(String, Bool, String, String?, String?, String, Int)])
    func refusals(_ method: String, _ onSession: Bool, _ who: String, _ type: String?, _ ifMatch: String?, _ body: String, _ status: Int) throws {
        let h = CoreHarness()
        let (id, _, _) = try session(h)
        let token: String? = switch who {
        case "": nil
        case "garbage": "not.a.token"
        case "other-room": mint(identity: "phone", room: "elsewhere", can: [.watch, .publish])
        default: mint(identity: who, can: [.watch, .publish])
        }
        let actions = http(h, 20, request(method, session: onSession ? id : nil, token: token, type: type, ifMatch: ifMatch, body: body))
        #expect(reply(actions, to: 20)?.status == status, "\(actions)")
        #expect(relayed(actions, to: 1) == nil, "a refused request reaches no endpoint")
        #expect(h.core.webRTCHTTPSessionCount == 1)
    }

    @Test func noEndpointIs404AndAFullServiceIs503() throws {
        let h = CoreHarness()
        #expect(reply(http(h, 10, request("POST")), to: 10)?.status == 404)
        _ = h.join(1, identity: "roof")
        for i in 0..<SignalingServerCore.maxWebRTCHTTPSessionsPerRoom {
            #expect(relayed(http(h, 100 + UInt64(i), request("POST", token: mint(identity: "viewer-\(i)", can: .watch))), to: 1) != nil)
        }
        let full = try #require(reply(http(h, 99, request("POST")), to: 99))
        #expect(full.status == 503 && full.fields.contains { $0.name == "Retry-After" })
    }

    @Test func theEndpointsRefusalReachesTheClientWithItsStatus() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof")
        let name = try #require(relayed(http(h, 10, request("POST")), to: 1)?.from)
        let bye = RelayMessage(kind: .bye, id: "b", to: name, payload: .object(["reason": .string("this endpoint has its 4 viewers"), "status": .number(503)]))
        let refused = try #require(reply(h.send(1, .relay(bye)), to: 10))
        #expect(refused.status == 503 && refused.body == "this endpoint has its 4 viewers")
        #expect(h.core.webRTCHTTPSessionCount == 0)
        // A status the endpoint has no business choosing becomes 503.
        let other = try #require(relayed(http(h, 11, request("POST")), to: 1)?.from)
        let odd = RelayMessage(kind: .bye, id: "c", to: other, payload: .object(["status": .number(200)]))
        #expect(reply(h.send(1, .relay(odd)), to: 11)?.status == 503)
    }

    /// A status no integer holds, sent by the endpoint (or anyone who became one), is a 503 like
    /// any status it has no business choosing: the service converted it unchecked and died.
    @Test(arguments: ["1e300", "-1e300", "9223372036854775808", "-0", "1e-300", "422.5"])
    func anExtremeStatusInTheEndpointsByeIs503(status: String) throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof")
        let name = try #require(relayed(http(h, 10, request("POST")), to: 1)?.from)
        let line = #"{"type":"bye","id":"b","to":""# + name + #"","payload":{"reason":"no","status":"# + status + "}}"
        #expect(reply(h.sendRaw(1, line), to: 10)?.status == 503)
        #expect(h.core.webRTCHTTPSessionCount == 0)
    }

    @Test func aSilentEndpointIs504AndAGoneClientEndsItsSession() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof")
        _ = http(h, 10, request("POST"))
        h.now += SignalingServerCore.webRTCHTTPAnswerTimeout
        let ticked = h.tick()
        #expect(reply(ticked, to: 10)?.status == 504 && relayed(ticked, to: 1)?.kind == .bye)
        // The join timeout of web connections does not cut a request that waits for its endpoint.
        let name = try #require(relayed(http(h, 11, request("POST")), to: 1)?.from)
        h.now += .seconds(5)
        #expect(errorCode(h.tick(), to: 11) == nil)
        let closed = h.close(11)
        #expect(relayed(closed, to: 1)?.kind == .bye && relayed(closed, to: 1)?.from == name)
        #expect(h.core.webRTCHTTPSessionCount == 0)
    }

    @Test func theEndpointLeavingEndsItsSessionsAndNobodyJoinsUnderASessionName() throws {
        let h = CoreHarness()
        _ = h.join(1, identity: "roof")
        _ = http(h, 10, request("POST"))
        #expect(reply(h.close(1), to: 10)?.status == 503)
        #expect(h.core.webRTCHTTPSessionCount == 0)
        #expect(errorCode(h.join(2, identity: "whep~0123"), to: 2) == .badMessage)
        // A participant may not speak for another's session.
        let g = CoreHarness()
        let (_, name, _) = try session(g)
        _ = g.join(2, identity: "other")
        #expect(errorCode(g.send(2, .relay(RelayMessage(kind: .answer, id: "x", to: name))), to: 2) == .unknownPeer)
    }

    @Test(arguments: [
        ("/whep/lab", WebRTCHTTPKind.whep, "lab", nil), ("/whip/lab/abc", .whip, "lab", "abc"),
    ] as [(String, WebRTCHTTPKind, String, String?)])
    func routes(_ path: String, _ kind: WebRTCHTTPKind, _ room: String, _ session: String?) {
        let route = WebRTCHTTPRequest.route(path)
        #expect(route?.kind == kind && route?.room == room && route?.session == session)
    }

    @Test(arguments: ["/whep", "/whep/", "/whep/lab/", "/whip/lab/a/b", "/ws", "/whep//x"])
    func notRoutes(_ path: String) { #expect(WebRTCHTTPRequest.route(path) == nil) }

    /// A trickle PATCH is bounded: credentials of ice-chars and their lengths, at most 20
    /// candidates, each a candidate, no control characters, 5 a second. Before, a 30 KB PATCH
    /// (a 13.9 KB ufrag and 1,190 empty candidate lines) became 17 MB of relays to the endpoint.
    @Test func trickleIsBounded() throws {
        let h = CoreHarness()
        let (id, _, created) = try session(h)
        let etag = try #require(created.fields.first { $0.name == "ETag" }?.value)
        func patch(_ connection: UInt64, _ body: String) -> (status: Int?, relayed: Int) {
            let actions = http(h, connection, request("PATCH", session: id, type: ICEFragment.contentType, ifMatch: etag, body: body))
            return (reply(actions, to: connection)?.status, actions.filter { if case .send(1, .relay) = $0 { return true }; return false }.count)
        }
        let credentials = "a=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\n"
        let good = "a=candidate:1 1 udp 2130706431 192.0.2.9 5000 typ host\r\n"
        #expect(patch(20, credentials + good) == (204, 1))
        #expect(patch(21, "a=ice-ufrag:" + String(repeating: "u", count: 13_900) + "\r\na=ice-pwd:0123456789012345678901\r\n" + good).status == 422)
        #expect(patch(22, credentials + String(repeating: "a=candidate:\r\n", count: 1_190)).status == 413)
        #expect(patch(23, credentials + "a=candidate:\r\n").status == 422)
        #expect(patch(24, credentials + String(repeating: good, count: 21)).status == 413)
        #expect(patch(25, credentials + "a=candidate:1 1 udp 1 192.0.2.9 5000 typ host\u{1}\r\n").status == 422)
        #expect(patch(26, "a=ice-ufrag:ab\"cd\r\na=ice-pwd:0123456789012345678901\r\n" + good).status == 422)
        // A burst of ten more is taken (the bucket refilled while none came), the next is not.
        h.now += .seconds(10)
        var statuses: [Int?] = []
        for i in 0..<11 { statuses.append(patch(30 + UInt64(i), credentials + good).status) }
        #expect(statuses.prefix(10).allSatisfy { $0 == 204 } && statuses.last == 429, "\(statuses)")
        h.now += .seconds(1)
        #expect(patch(50, credentials + good).status == 204, "the bucket refills")
    }
}
