import EndpointSignaling
import FoundationEssentials
import Signaling
import SignalingService

/// The `extremes` fuzz target: every message of the signaling protocol and every WHIP/WHEP
/// request, well formed but for the values the input puts in them: numbers at and past every
/// edge a conversion can trap on (1e300, -1e300, 2^63, -0, 1e-300, 1e400 that no Double holds),
/// huge strings, control characters, the wrong JSON types. They go through the service's state
/// machine with a room whose endpoint has a WHEP and a WHIP session open, from the endpoint, from
/// a participant and from HTTP clients, and through what an endpoint reads of Janus.
///
/// The input is a program: each step takes a byte for what to send, one for the field to change,
/// one for the value (a byte more for a string's length), until the input runs out.
enum ExtremeMessages {
    /// What a value in a message can be made of. `raw` is written into the JSON text as it is:
    /// numbers that JSON can spell and a Double cannot hold.
    enum Value {
        case json(JSONValue)
        case raw(String)
    }

    static let extremes: [Value] = [
        .json(.number(1e300)), .json(.number(-1e300)), .json(.number(9_223_372_036_854_775_808)), .json(.number(-9_223_372_036_854_775_808)),
        .json(.number(18_446_744_073_709_551_616)), .json(.number(-0.0)), .json(.number(1e-300)), .json(.number(0.5)), .json(.number(-1)),
        .json(.number(4_294_967_296)), .json(.number(65_536)), .json(.number(9_007_199_254_740_994)), .raw("9007199254740993"), .json(.number(.greatestFiniteMagnitude)),
        .raw("1e400"), .raw("-1e400"), .raw("-0"), .raw("18446744073709551616"), .raw("1E-400"), .raw("123456789012345678901234567890"),
        .json(.string(hugeText)), .json(.string(String(repeating: "x", count: 4_097))), .json(.string(String(repeating: "é", count: 4_500))),
        .json(.string("")),
        .json(.string("x\n<3>forged\r\u{1b}[31m")), .json(.string("\u{0}")), .json(.string("whep~x")), .json(.string("*")),
        .json(.array(Array(repeating: .number(1e300), count: 300))), .json(.array([])), .json(.object([:])), .json(.null), .json(.bool(true)),
        .json(.object(["sdp": .number(1e300), "candidate": .number(-0.0), "status": .number(1e300)])),
    ]

    /// Past a line's limit (64 KiB) once in JSON.
    static let hugeText = String(repeating: "\u{1}", count: 11_000)

    /// Field names the protocol's messages and payloads use (and a few they do not).
    static let fields = ["type", "id", "from", "to", "payload", "room", "token", "rejoin", "participant", "peers", "iceServers", "reason",
                         "code", "message", "expires", "sdp", "candidate", "sdpMid", "sdpMLineIndex", "usernameFragment", "status", "via",
                         "iceRestart", "ufrag", "pwd", "candidates", "urls", "username", "credential", "janus", "lost", "error_code",
                         "plugindata", "data", "unpublished", "leaving", "completed", "uplink", "receiving"]

    /// One well-formed message of every kind, as the endpoint (or a participant) would send it,
    /// and as the service sends them (which a client parses).
    static func templates(session: String) -> [[String: JSONValue]] {
        let sdp = JSONValue.string("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n")
        return [
            ["type": .string("offer"), "id": .string("o1"), "to": .string("peer"), "payload": .object(["type": .string("offer"), "sdp": sdp])],
            ["type": .string("answer"), "id": .string("a1"), "to": .string(session), "payload": .object(["type": .string("answer"), "sdp": sdp])],
            ["type": .string("candidate"), "id": .string("c1"), "to": .string("peer"),
             "payload": .object(["candidate": .string("candidate:1 1 udp 2130706431 192.0.2.1 5000 typ host"), "sdpMid": .string("0"),
                                 "sdpMLineIndex": .number(0), "usernameFragment": .string("abcd")])],
            ["type": .string("bye"), "id": .string("b1"), "to": .string(session), "payload": .object(["reason": .string("no"), "status": .number(422)])],
            ["type": .string("join"), "room": .string("lab"), "token": .string(ExtremeMessages.participantToken)],
            ["type": .string("ping"), "id": .number(7)], ["type": .string("pong"), "id": .number(7)], ["type": .string("ack"), "id": .string("x")],
            ["type": .string("error"), "code": .string("room_full"), "message": .string("full"), "id": .string("x")],
            ["type": .string("token"), "token": .string("a.b.c"), "expires": .number(1_800_000_000), "iceServers": .array([
                .object(["urls": .array([.string("turn:192.0.2.1")]), "username": .string("u"), "credential": .string("c")])])],
            ["type": .string("joined"), "room": .string("lab"), "participant": .string("me"), "peers": .array([.string("peer")])],
            ["type": .string("peer-joined"), "participant": .string("peer"), "rejoin": .bool(true)],
            ["type": .string("peer-left"), "participant": .string("peer"), "reason": .string("disconnected")],
            ["type": .string("offer"), "id": .string("r1"), "to": .string("roof"), "payload": .object([
                "type": .string("offer"), "via": .string("whip"),
                "iceRestart": .object(["ufrag": .string("abcd"), "pwd": .string("0123456789012345678901"), "candidates": .array([])])])],
        ]
    }

    /// What Janus answers or sends, as the VideoRoom's code reads them.
    static let janusTemplates: [[String: JSONValue]] = [
        ["janus": .string("slowlink"), "uplink": .bool(true), "lost": .number(5)],
        ["janus": .string("media"), "type": .string("video"), "receiving": .bool(true)],
        ["janus": .string("trickle"), "candidate": .object(["candidate": .string("candidate:1 1 udp 1 192.0.2.1 1 typ host")])],
        ["janus": .string("event"), "plugindata": .object(["data": .object(["videoroom": .string("event"), "unpublished": .number(42)])])],
        ["janus": .string("error"), "error": .object(["code": .number(458), "reason": .string("no such session")])],
        ["janus": .string("success"), "data": .object(["id": .number(42)]), "plugindata": .object(["data": .object(["error_code": .number(426)])])],
    ]

    static let secret = try! TokenSecret(Array("fuzzing-secret-of-thirty-two-bytes!!".utf8))  // 36 bytes: above the minimum
    static let verifier = TokenVerifier(secret: secret)
    static let wallClock: Int64 = 1_800_000_000
    static func token(_ identity: String) -> String {
        TokenIssuer(secret: secret).mint(TokenClaims(identity: identity, room: "lab", issuedAt: wallClock, expires: wallClock + 3600))
    }
    static let endpointToken = token("roof")
    static let participantToken = token("peer")
    static let viewerToken = token("phone")

    /// Reads the program's bytes; zeros once they run out.
    struct Program {
        let bytes: [UInt8]
        var at = 0
        var done: Bool { at >= bytes.count }
        mutating func next() -> Int {
            defer { at += 1 }
            return at < bytes.count ? Int(bytes[at]) : 0
        }
        mutating func text(_ count: Int) -> String {
            let end = min(bytes.count, at + count)
            defer { at = end }
            return at < end ? String(decoding: bytes[at..<end], as: UTF8.self) : ""
        }
    }

    /// A value for the next field: an extreme, or a string of the input's own bytes.
    static func value(_ program: inout Program) -> Value {
        let pick = program.next()
        if pick < extremes.count { return extremes[pick] }
        return .json(.string(program.text(program.next())))
    }

    /// `object` with the field the program names (at the top, or in its payload) set to `value`,
    /// as one JSON text.
    static func mutated(_ object: [String: JSONValue], _ program: inout Program) -> [UInt8] {
        var top = object
        var raws: [String] = []
        for _ in 0..<(1 + program.next() % 3) {
            let name = fields[program.next() % fields.count]
            let inPayload = program.next() % 2 == 1
            let json: JSONValue
            switch value(&program) {
            case .json(let v): json = v
            case .raw(let text):
                json = .string("@@raw\(raws.count)@@")
                raws.append(text)
            }
            if inPayload, case .object(var payload)? = top["payload"] ?? top["plugindata"] {
                payload[name] = json
                top[top["payload"] != nil ? "payload" : "plugindata"] = .object(payload)
            } else {
                top[name] = json
            }
        }
        var text = String(decoding: JSONValue.object(top).serialized, as: UTF8.self)
        for (i, raw) in raws.enumerated() { text = text.replacing("\"@@raw\(i)@@\"", with: raw) }
        return Array(text.utf8)
    }

    /// A value as text in an SDP line or a header: numbers as Swift writes them, strings as they are.
    static func text(_ value: JSONValue) -> String {
        switch value {
        case .number(let n): "\(n)"
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .null: "null"
        case .array(let items): "[\(items.count)]"
        case .object: "{}"
        }
    }

    /// An SDP offer or ICE fragment with the program's values in its numeric and text fields.
    static func body(_ program: inout Program) -> String {
        func piece() -> String {
            switch value(&program) {
            case .raw(let text): text
            case .json(let other): text(other)
            }
        }
        switch program.next() % 3 {
        case 0:
            return "v=0\r\no=- \(piece()) 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio \(piece()) UDP/TLS/RTP/SAVPF \(piece())\r\n"
                + "a=rtpmap:\(piece()) opus/\(piece())/2\r\na=max-message-size:\(piece())\r\na=ice-ufrag:\(piece())\r\na=ice-pwd:0123456789012345678901\r\n"
                + "a=candidate:1 1 udp \(piece()) 192.0.2.1 \(piece()) typ host\r\na=ssrc:\(piece()) cname:x\r\n"
        case 1:
            return "a=ice-ufrag:\(piece())\r\na=ice-pwd:\(piece())\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:\(piece())\r\n"
                + String(repeating: "a=candidate:\(piece())\r\n", count: 1 + program.next() % 8) + "a=end-of-candidates\r\n"
        default:
            return piece()
        }
    }

    static func run(_ bytes: [UInt8]) {
        var program = Program(bytes: bytes)
        let core = SignalingServerCore(verifier: verifier, iceServers: ICEServerPolicy(stunURLs: ["stun:192.0.2.1"], turnURLs: ["turn:192.0.2.1"],
                                                                                     turnSecret: Array("turn".utf8))) { "seat" }
        var now = Duration.seconds(1)
        func line(_ message: SignalingMessage, from id: UInt64) -> [SignalingServerCore.Action] {
            core.received(Array(message.serialized().dropLast()), from: id, now: now, wallClock: wallClock)
        }
        _ = core.connectionOpened(1, now: now, address: "192.0.2.1")
        _ = line(.join(room: "lab", token: endpointToken, rejoin: false), from: 1)
        _ = core.connectionOpened(2, now: now, address: "192.0.2.2")
        _ = line(.join(room: "lab", token: participantToken, rejoin: false), from: 2)
        // A WHEP session answered, and a WHIP POST that waits for its answer.
        var sessions: [String] = []
        for (id, kind) in [(UInt64(3), WebRTCHTTPKind.whep), (4, .whip)] {
            _ = core.connectionOpened(id, now: now, address: "192.0.2.3")
            let asked = core.webRTCHTTP(id, WebRTCHTTPRequest(method: "POST", kind: kind, room: "lab", bearerToken: viewerToken, contentType: "application/sdp",
                                                              body: "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"), now: now, wallClock: wallClock)
            for case .send(1, .relay(let offer)) in asked {
                guard let name = offer.from else { continue }
                sessions.append(name)
                if kind == .whep {
                    _ = line(.relay(RelayMessage(kind: .answer, id: "a-\(id)", to: name, payload: .object(["type": .string("answer"), "sdp": .string("v=0")]))), from: 1)
                }
            }
        }
        var connection: UInt64 = 10
        while !program.done {
            now += .milliseconds(program.next() * 10)
            let step = program.next()
            switch step % 5 {
            case 0, 1:
                // A message from the endpoint (to its sessions or its peer) or from the participant.
                let all = templates(session: sessions.isEmpty ? "whep~none" : sessions[program.next() % sessions.count])
                let text = mutated(all[program.next() % all.count], &program)
                _ = try? SignalingMessage(parsing: text)
                _ = core.received(text, from: step % 5 == 0 ? 1 : 2, now: now, wallClock: wallClock)
            case 2:
                // A WHIP/WHEP request: to the room, or to a session, with extreme headers and body.
                connection += 1
                _ = core.connectionOpened(connection, now: now, address: "192.0.2.4")
                let methods = ["POST", "PATCH", "DELETE", "GET"]
                let session = program.next() % 3 == 0 || sessions.isEmpty ? nil : String(sessions[program.next() % sessions.count].split(separator: "~").last ?? "")
                let request = WebRTCHTTPRequest(method: methods[program.next() % methods.count], kind: program.next() % 2 == 0 ? .whep : .whip, room: "lab",
                                                session: session, bearerToken: program.next() % 4 == 0 ? program.text(program.next()) : viewerToken,
                                                contentType: program.next() % 2 == 0 ? "application/sdp" : ICEFragment.contentType,
                                                ifMatch: program.next() % 2 == 0 ? "\"*\"" : nil, body: body(&program))
                _ = core.webRTCHTTP(connection, request, now: now, wallClock: wallClock)
                // The head as the web side reads it, with an extreme Content-Length.
                var reader = HTTPRequestHead.Reader()
                let length: String = switch value(&program) {
                case .raw(let raw): raw
                case .json(let other): text(other)
                }
                _ = try? reader.append(Array("\(request.method) /whep/lab HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\n\r\n".utf8))
            case 3:
                // What an endpoint reads of Janus.
                let text = mutated(janusTemplates[program.next() % janusTemplates.count], &program)
                guard let value = try? JSONValue(parsing: text) else { break }
                _ = JanusEvent(value)
                _ = JanusClient.id(value["data"]?["id"])
                _ = try? JanusClient.checkPlugin(value["plugindata"]?["data"] ?? value, request: "x")
            default:
                _ = core.tick(now: now, wallClock: wallClock + Int64(program.next()) * 600)
                if program.next() % 4 == 0 { _ = core.connectionClosed(UInt64(1 + program.next() % 4), now: now) }
            }
        }
    }
}
