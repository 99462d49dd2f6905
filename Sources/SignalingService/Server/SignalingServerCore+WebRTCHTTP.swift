import FoundationEssentials
import Glibc
import Platform
import Signaling

/// WHIP (RFC 9725) and WHEP on the service: an HTTP client (OBS, ffmpeg, GStreamer's whipsink, a
/// WHEP player) becomes a party to a room for as long as its session lives. The service hands
/// its offer to the room's endpoint as signaling, from a name of the session's own
/// ("whep~ID"/"whip~ID"), with `"via": "whep"` (or "whip") in the payload, and answers the POST
/// with the endpoint's answer; PATCH becomes trickled candidates or an ICE restart; DELETE, a
/// bye. Media flows between the client and the endpoint, never through the service.
public enum WebRTCHTTPKind: String, Sendable, CaseIterable {
    /// The client publishes into the room: the endpoint takes it as its peer.
    case whip
    /// The client watches the endpoint.
    case whep
}

/// A WHIP/WHEP request as the web side read it.
public struct WebRTCHTTPRequest: Sendable, Equatable {
    public var method: String
    public var kind: WebRTCHTTPKind
    public var room: String
    /// The session (the last path segment of its Location); nil for the endpoint itself.
    public var session: String?
    /// The token of `Authorization: Bearer`.
    public var bearerToken: String?
    public var contentType: String?
    public var ifMatch: String?
    public var body: String

    public init(method: String, kind: WebRTCHTTPKind, room: String, session: String? = nil, bearerToken: String? = nil,
                contentType: String? = nil, ifMatch: String? = nil, body: String = "") {
        self.method = method
        self.kind = kind
        self.room = room
        self.session = session
        self.bearerToken = bearerToken
        self.contentType = contentType
        self.ifMatch = ifMatch
        self.body = body
    }

    /// Reads `/whip/ROOM`, `/whep/ROOM`, `/whip/ROOM/SESSION`, `/whep/ROOM/SESSION`; nil for any other path.
    public static func route(_ path: String) -> (kind: WebRTCHTTPKind, room: String, session: String?)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3 || parts.count == 4, parts[0].isEmpty, let kind = WebRTCHTTPKind(rawValue: String(parts[1])), !parts[2].isEmpty else { return nil }
        if parts.count == 4 {
            guard !parts[3].isEmpty else { return nil }
            return (kind, String(parts[2]), String(parts[3]))
        }
        return (kind, String(parts[2]), nil)
    }
}

/// An HTTP response the core decides; the web side writes it and closes the connection.
public struct HTTPReply: Sendable, Equatable {
    public var status: Int
    public var fields: [(name: String, value: String)]
    public var body: String
    public var contentType: String

    public init(status: Int, _ body: String, fields: [(name: String, value: String)] = [], contentType: String = "text/plain; charset=utf-8") {
        self.status = status
        self.fields = fields
        self.body = body
        self.contentType = contentType
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.body == b.body && a.contentType == b.contentType && a.fields.map { [$0.name, $0.value] } == b.fields.map { [$0.name, $0.value] }
    }
}

/// One WHIP/WHEP session: who it talks to, its entity tag, and the request waiting for the endpoint.
struct WebRTCHTTPSession {
    enum Purpose { case post, restart }
    let id: String
    let kind: WebRTCHTTPKind
    let room: String
    let endpoint: (identity: String, connection: SignalingServerCore.ConnectionID)
    /// The identity of the token that made it: PATCH and DELETE need a token of the same identity.
    let owner: String
    /// The token's expiry: the session, and its TURN credentials, end with it.
    let expires: Int64
    var etag: String
    var waiting: (connection: SignalingServerCore.ConnectionID, since: Duration, purpose: Purpose)?
    /// PATCHes this session may still send now (a token bucket, refilled by time).
    var patchTokens = SignalingServerCore.patchBurst
    var patchRefill: Duration = .zero

    /// The name the endpoint sees the session under.
    var name: String { Self.name(kind, id) }
    static func name(_ kind: WebRTCHTTPKind, _ id: String) -> String { "\(kind.rawValue)~\(id)" }
    var location: String { "/\(kind.rawValue)/\(room)/\(id)" }
}

extension SignalingServerCore {
    /// Sessions in the whole service, and per room: past them a POST gets 503.
    public static let maxWebRTCHTTPSessions = 256
    public static let maxWebRTCHTTPSessionsPerRoom = 16
    /// How long the endpoint has to answer an offer or a restart.
    public static let webRTCHTTPAnswerTimeout: Duration = .seconds(8)
    /// What a trickle PATCH may carry and how often: every candidate becomes a relay message to
    /// the endpoint, so no request may make the service send it more than it takes (before, a
    /// 30 KB PATCH became 17 MB of relays and dropped the endpoint's connection).
    public static let maxPatchBody = 8 * 1024
    public static let maxCandidatesPerPatch = 20
    public static let patchesPerSecond = 5.0
    public static let patchBurst = 10.0

    /// A relay message ID of its own for each message of a session: endpoints drop a message
    /// whose sender and ID they have seen (a copy re-sent after a reconnect).
    func nextSessionMessageID(_ name: String) -> String {
        webRTCHTTPMessages += 1
        return "\(name)-\(webRTCHTTPMessages)"
    }

    /// Whether identities of this form are the service's own (WHIP/WHEP sessions): no token may join under one.
    static func isSessionName(_ identity: String) -> Bool { identity.hasPrefix("whip~") || identity.hasPrefix("whep~") }

    /// A WHIP/WHEP request. The answer comes now (a refusal, a PATCH of candidates, a DELETE), or
    /// once the endpoint answers (a POST, an ICE restart), or after `webRTCHTTPAnswerTimeout`.
    public func webRTCHTTP(_ id: ConnectionID, _ request: WebRTCHTTPRequest, now: Duration, wallClock: Int64) -> [Action] {
        let allowed = request.session == nil ? "POST, OPTIONS" : "PATCH, DELETE, OPTIONS"
        let method = request.method
        guard (request.session == nil && method == "POST") || (request.session != nil && (method == "PATCH" || method == "DELETE")) else {
            return reply(id, HTTPReply(status: 405, "\(method) is not allowed here; \(allowed) are", fields: [("Allow", allowed)]))
        }
        guard Self.isValidRoomName(request.room) else { return reply(id, HTTPReply(status: 404, "no room of that name")) }
        // The bearer token is a callend token for the room, as a participant's is.
        guard let token = request.bearerToken, !token.isEmpty else {
            return reply(id, HTTPReply(status: 401, "a bearer token for room \(request.room) is needed (Authorization: Bearer ...)", fields: [("WWW-Authenticate", "Bearer")]))
        }
        let claims: TokenClaims
        do {
            claims = try verifier.verify(token, room: request.room, now: wallClock)
        } catch {
            let status = error.code == .tokenRoom ? 403 : 401
            return reply(id, HTTPReply(status: status, "\(error.code.rawValue): \(error.message)", fields: status == 401 ? [("WWW-Authenticate", "Bearer error=\"invalid_token\"")] : []))
        }
        // A renewal takes back its own seat and is good for nothing else (signaling.md, Tokens).
        guard !claims.renewal else {
            return reply(id, HTTPReply(status: 401, "token_renewal: a renewed credential is not a bearer token; use a token minted for this",
                                       fields: [("WWW-Authenticate", "Bearer error=\"invalid_token\"")]))
        }
        let needed: TokenScope = request.kind == .whip ? .publish : .watch
        guard claims.can.contains(needed) else {
            return reply(id, HTTPReply(status: 403, "token_scope: this token allows \(claims.can.isEmpty ? "nothing" : claims.can.description), not \(needed) (mint one with callend token --can \(needed))"))
        }
        guard let sessionID = request.session else { return post(id, request, claims: claims, now: now, wallClock: wallClock) }
        guard var session = webRTCHTTPSessions[sessionID], session.room == request.room, session.kind == request.kind else {
            return reply(id, HTTPReply(status: 404, "no such session"))
        }
        guard session.owner == claims.identity else {
            return reply(id, HTTPReply(status: 403, "the session belongs to another identity"))
        }
        if method == "DELETE" {
            webRTCHTTPSessions[sessionID] = nil
            var actions = endSession(session, reason: "the \(session.kind.rawValue.uppercased()) client ended its session")
            actions += reply(id, HTTPReply(status: 200, ""))
            return actions
        }
        // PATCH (RFC 9725 §4.3): trickled candidates under the session's ETag, or an ICE restart under "*".
        guard request.contentType?.lowercased().hasPrefix(ICEFragment.contentType) == true else {
            return reply(id, HTTPReply(status: 415, "a PATCH takes \(ICEFragment.contentType)", fields: [("Accept-Patch", ICEFragment.contentType)]))
        }
        let ifMatch = request.ifMatch?.trimmed()
        let restart = ifMatch == "\"*\"" || ifMatch == "*"
        // Clients written before RFC 9725 send trickle without If-Match (Debian's whip-client):
        // taken; a tag that names another ICE session is not.
        if let ifMatch, !restart, ifMatch != session.etag { return reply(id, HTTPReply(status: 412, "the ETag does not match the session's ICE session")) }
        // The session's PATCHes at a rate real trickle needs, not a flood's.
        session.patchTokens = min(Self.patchBurst, session.patchTokens + (now - session.patchRefill).inSeconds * Self.patchesPerSecond)
        session.patchRefill = now
        guard session.patchTokens >= 1 else {
            webRTCHTTPSessions[sessionID] = session
            return reply(id, HTTPReply(status: 429, "more than \(Int(Self.patchesPerSecond)) PATCHes a second", fields: [("Retry-After", "1")]))
        }
        session.patchTokens -= 1
        webRTCHTTPSessions[sessionID] = session
        let fragment: ICEFragment
        do { fragment = try ICEFragment(parsing: request.body) } catch { return reply(id, HTTPReply(status: 422, error.description)) }
        if let refusal = Self.checkTrickle(fragment, body: request.body) { return reply(id, HTTPReply(status: refusal.status, refusal.reason)) }
        guard session.waiting == nil else { return reply(id, HTTPReply(status: 409, "an earlier request of this session waits for the endpoint")) }
        if restart {
            session.waiting = (id, now, .restart)
            webRTCHTTPSessions[sessionID] = session
            waitingHTTP[id] = sessionID
            let payload = JSONValue.object(["type": .string("offer"), "via": .string(session.kind.rawValue), "iceRestart": .object([
                "ufrag": .string(fragment.ufrag), "pwd": .string(fragment.password), "candidates": .array(fragment.candidates.map(JSONValue.string)),
            ])])
            return [.send(session.endpoint.connection, .relay(RelayMessage(kind: .offer, id: nextSessionMessageID(session.name), from: session.name, to: session.endpoint.identity, payload: payload)))]
        }
        var actions: [Action] = []
        for line in fragment.candidates + (fragment.endOfCandidates ? [""] : []) {
            let payload = JSONValue.object(["candidate": .string(line), "sdpMid": .string(fragment.mid), "sdpMLineIndex": .number(0), "usernameFragment": .string(fragment.ufrag)])
            actions.append(.send(session.endpoint.connection, .relay(RelayMessage(kind: .candidate, id: nextSessionMessageID(session.name), from: session.name, to: session.endpoint.identity, payload: payload))))
        }
        return actions + reply(id, HTTPReply(status: 204, "", fields: [("ETag", session.etag)]))
    }

    /// What a trickle PATCH may hold (RFC 8839 §5.4, RFC 8445 §5.3): ICE credentials of ice-chars
    /// and their lengths, a short mid, at most `maxCandidatesPerPatch` candidates each of the
    /// candidate grammar's fields, and no control characters. Nil when it is fine.
    static func checkTrickle(_ fragment: ICEFragment, body: String) -> (status: Int, reason: String)? {
        if let bad = controlCharacterRefusal(body) { return (422, bad) }
        func iceChars(_ text: String, _ range: ClosedRange<Int>) -> Bool {
            range.contains(text.utf8.count) && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2b || c == 0x2f
            }
        }
        guard iceChars(fragment.ufrag, 4...256), iceChars(fragment.password, 22...256) else {
            return (422, "ICE credentials are ice-chars (A-Z a-z 0-9 + /): a ufrag of 4-256, a password of 22-256")
        }
        guard (1...32).contains(fragment.mid.utf8.count) else { return (422, "a mid of 1-32 characters") }
        guard fragment.candidates.count <= maxCandidatesPerPatch else {
            return (413, "\(fragment.candidates.count) candidates in one PATCH; at most \(maxCandidatesPerPatch)")
        }
        for candidate in fragment.candidates {
            let fields = candidate.split(separator: " ")
            guard candidate.utf8.count <= 512, fields.count >= 8, fields[6] == "typ" else {
                return (422, "not an ICE candidate (candidate:FOUNDATION COMPONENT TRANSPORT PRIORITY ADDRESS PORT typ TYPE ...): \(candidate.prefix(80))")
            }
        }
        return nil
    }

    /// SDP is text lines (RFC 8866 §9): control characters, which JSON escapes sixfold, are refused.
    static func controlCharacterRefusal(_ body: String) -> String? {
        body.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\r" && $0 != "\n" && $0 != "\t" || $0.value == 0x7f })
            ? "the body has control characters: not SDP" : nil
    }

    private func post(_ id: ConnectionID, _ request: WebRTCHTTPRequest, claims: TokenClaims, now: Duration, wallClock: Int64) -> [Action] {
        guard request.contentType?.lowercased().hasPrefix("application/sdp") == true else {
            return reply(id, HTTPReply(status: 415, "the offer goes as application/sdp"))
        }
        guard request.body.hasPrefix("v=0") else { return reply(id, HTTPReply(status: 422, "the body is not an SDP offer")) }
        if let bad = Self.controlCharacterRefusal(request.body) { return reply(id, HTTPReply(status: 422, bad)) }
        // The room's endpoint: its first participant on this node (a WHIP publisher becomes its peer).
        guard let endpoint = rooms[request.room]?.first else {
            return reply(id, HTTPReply(status: 404, "no endpoint is in room \(request.room)\(clustered ? " on this node" : "")"))
        }
        // One identity's sessions are capped in all rooms together: one token (a "*" one above all)
        // cannot take the service's sessions from everyone else.
        guard webRTCHTTPSessions.values.filter({ $0.owner == claims.identity }).count < limits.maxSessionsPerIdentity else {
            return reply(id, HTTPReply(status: 429, "\(claims.identity) has \(limits.maxSessionsPerIdentity) sessions open; end one first", fields: [("Retry-After", "10")]))
        }
        guard webRTCHTTPSessions.count < Self.maxWebRTCHTTPSessions,
              webRTCHTTPSessions.values.filter({ $0.room == request.room }).count < Self.maxWebRTCHTTPSessionsPerRoom else {
            return reply(id, HTTPReply(status: 503, "too many sessions; try again later", fields: [("Retry-After", "10")]))
        }
        let sessionID = Crypto.hex(Crypto.randomBytes(12))
        // A session lives as long as its token, and never past the service's maximum.
        let session = WebRTCHTTPSession(id: sessionID, kind: request.kind, room: request.room, endpoint: endpoint, owner: claims.identity,
                                        expires: min(claims.expires, wallClock + limits.maxSessionLifetime),
                                        etag: "\"\(Crypto.hex(Crypto.randomBytes(6)))\"", waiting: (id, now, .post))
        webRTCHTTPSessions[sessionID] = session
        waitingHTTP[id] = sessionID
        let payload = JSONValue.object(["type": .string("offer"), "sdp": .string(request.body), "via": .string(request.kind.rawValue)])
        counters.relayed += 1
        return [.send(endpoint.connection, .relay(RelayMessage(kind: .offer, id: nextSessionMessageID(session.name), from: session.name, to: endpoint.identity, payload: payload)))]
    }

    private func reply(_ id: ConnectionID, _ reply: HTTPReply) -> [Action] {
        waitingHTTP[id] = nil
        return [.respond(id, reply)]
    }

    /// A relay message from a participant to a WHIP/WHEP session; nil when `to` names none.
    func forwardToSession(_ message: RelayMessage, from id: ConnectionID, identity: String, now: Duration, wallClock: Int64) -> [Action]? {
        guard let to = message.to, Self.isSessionName(to), let sessionID = to.split(separator: "~", maxSplits: 1).last.map(String.init),
              var session = webRTCHTTPSessions[sessionID], session.name == to else { return nil }
        guard session.endpoint.connection == id else {
            return [.send(id, .error(code: .unknownPeer, message: "\(to) is not your session", id: message.id))]
        }
        var actions: [Action] = [.send(id, .ack(id: message.id))]
        switch message.kind {
        case .answer:
            guard let waiting = session.waiting, let sdp = message.payload["sdp"]?.stringValue else { return actions }
            session.waiting = nil
            session.etag = "\"\(Crypto.hex(Crypto.randomBytes(6)))\""
            webRTCHTTPSessions[sessionID] = session
            switch waiting.purpose {
            case .post:
                var fields: [(name: String, value: String)] = [("Location", session.location), ("ETag", session.etag), ("Accept-Patch", ICEFragment.contentType)]
                for server in iceServers?.servers(for: session.name, room: session.room, now: wallClock, notAfter: session.expires) ?? [] {
                    fields += LinkField.serialize(server).map { ("Link", $0) }
                }
                actions += reply(waiting.connection, HTTPReply(status: 201, sdp, fields: fields, contentType: "application/sdp"))
            case .restart:
                guard let fragment = try? ICEFragment(parsing: sdp) else {
                    actions += reply(waiting.connection, HTTPReply(status: 500, "the endpoint's answer to the restart has no ICE credentials"))
                    return actions
                }
                actions += reply(waiting.connection, HTTPReply(status: 200, fragment.serialized, fields: [("ETag", session.etag)], contentType: ICEFragment.contentType))
            }
        case .bye:
            // The endpoint refused or ended the session; a request that waits hears why.
            webRTCHTTPSessions[sessionID] = nil
            if let waiting = session.waiting {
                let reason = message.payload["reason"]?.stringValue ?? "the endpoint ended the session"
                let asked = message.payload["status"]?.integer(in: 100...599) ?? 503
                let status = [403, 409, 422, 503].contains(asked) ? asked : 503
                actions += reply(waiting.connection, HTTPReply(status: status, reason, fields: status == 503 ? [("Retry-After", "5")] : []))
            }
        case .offer, .candidate:
            break  // the endpoint's candidates ride in its answer
        }
        return actions
    }

    /// Tells the endpoint a session is over (a bye from the session's name).
    private func endSession(_ session: WebRTCHTTPSession, reason: String) -> [Action] {
        var actions: [Action] = []
        if let waiting = session.waiting { actions += reply(waiting.connection, HTTPReply(status: 503, reason, fields: [("Retry-After", "5")])) }
        actions.append(.send(session.endpoint.connection, .relay(RelayMessage(kind: .bye, id: nextSessionMessageID(session.name), from: session.name, to: session.endpoint.identity,
                                                                              payload: .object(["reason": .string(reason)])))))
        return actions
    }

    /// An HTTP connection that waited for the endpoint closed: a POST's session is dropped (and
    /// the endpoint told); a restart's session goes on.
    func webRTCHTTPConnectionClosed(_ id: ConnectionID) -> [Action] {
        guard let sessionID = waitingHTTP.removeValue(forKey: id), var session = webRTCHTTPSessions[sessionID], let waiting = session.waiting, waiting.connection == id else { return [] }
        session.waiting = nil
        if waiting.purpose == .post {
            webRTCHTTPSessions[sessionID] = nil
            return endSession(session, reason: "the \(session.kind.rawValue.uppercased()) client went away before the answer")
        }
        webRTCHTTPSessions[sessionID] = session
        return []
    }

    /// The endpoint of some sessions left the room: their waiting requests get 503, the rest just end.
    func webRTCHTTPEndpointLeft(_ id: ConnectionID) -> [Action] {
        var actions: [Action] = []
        for (sessionID, session) in webRTCHTTPSessions where session.endpoint.connection == id {
            webRTCHTTPSessions[sessionID] = nil
            if let waiting = session.waiting { actions += reply(waiting.connection, HTTPReply(status: 503, "the endpoint left the room", fields: [("Retry-After", "5")])) }
        }
        return actions
    }

    /// Requests the endpoint did not answer in time get 504; sessions whose token expired end.
    func webRTCHTTPTick(now: Duration, wallClock: Int64) -> [Action] {
        var actions: [Action] = []
        for (sessionID, var session) in webRTCHTTPSessions {
            if session.expires <= wallClock {
                webRTCHTTPSessions[sessionID] = nil
                actions += endSession(session, reason: "the session's token expired")
                continue
            }
            guard let waiting = session.waiting, now - waiting.since >= Self.webRTCHTTPAnswerTimeout else { continue }
            session.waiting = nil
            let text = "the endpoint did not answer within \(Self.webRTCHTTPAnswerTimeout)"
            if waiting.purpose == .post {
                webRTCHTTPSessions[sessionID] = nil
                actions += endSession(session, reason: text)
                actions += reply(waiting.connection, HTTPReply(status: 504, text))
            } else {
                webRTCHTTPSessions[sessionID] = session
                actions += reply(waiting.connection, HTTPReply(status: 504, text))
            }
        }
        return actions
    }

    /// Sessions open now (for tests and metrics).
    public var webRTCHTTPSessionCount: Int { webRTCHTTPSessions.count }
}
