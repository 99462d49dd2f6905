import Foundation
@testable import SignalingService
import Testing
import TestSupport
@testable import Signaling

func startWebServer(limits: ServerLimits = ServerLimits(), tls: TLSContext? = nil, allowedOrigins: [String] = [],
                    allowedHosts: [String] = []) throws -> SignalingServer {
    var configuration = SignalingServerConfiguration(port: 0, secret: testSecret, tls: tls)
    configuration.limits = limits
    configuration.allowedOrigins = allowedOrigins
    configuration.allowedHosts = allowedHosts
    configuration.web = ("127.0.0.1", 0)
    let server = try SignalingServer(configuration: configuration)
    server.start()
    return server
}

func joinToken(_ identity: String, room: String = "lab", can: TokenScope = .join) -> String {
    let now = Int64(Date().timeIntervalSince1970)
    var claims = TokenClaims(identity: identity, room: room, issuedAt: now, expires: now + 600)
    claims.can = can
    return TokenIssuer(secret: testSecret).mint(claims)
}

/// A bare connection to the web side: raw HTTP, then WebSocket frames as a browser sends them.
final class WebClient {
    let fd: Int32
    private var input: [UInt8] = []
    private let tls: TLSSession?

    /// Over TLS (HTTPS, WSS) when `tls` is a client context; the server's name is checked as `serverName`.
    init(port: Int, tls context: TLSContext? = nil, serverName: String = "localhost", from source: String? = nil) throws {
        fd = try source.map { try connectFrom($0, port: port) } ?? TCPSocket.connect(host: "127.0.0.1", port: port, timeout: .seconds(2))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let context {
            let session = try TLSSession(context: context, fd: fd, serverName: serverName)
            try session.handshake()
            tls = session
        } else {
            tls = nil
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n: Int = bytes[offset...].withUnsafeBytes { raw in
                if let tls {
                    guard case .bytes(let count)? = try? tls.write(raw) else { return -1 }
                    return count
                }
                return Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Reads more; false at EOF, an error or 3 s of silence.
    private func fill() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n: Int = buffer.withUnsafeMutableBytes { raw in
            if let tls {
                guard case .bytes(let count)? = try? tls.read(into: raw) else { return -1 }
                return count
            }
            return Glibc.read(fd, raw.baseAddress, raw.count)
        }
        guard n > 0 else { return false }
        input += buffer[0..<n]
        return true
    }

    /// The response's status and head, after sending `request` (a whole request head).
    func request(_ request: String) -> (status: Int, head: String, body: String) {
        send(Array(request.utf8))
        while true {
            if let end = input.firstRange(of: [13, 10, 13, 10]) {
                let head = String(decoding: input[..<end.lowerBound], as: UTF8.self)
                input.removeSubrange(..<end.upperBound)
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                while input.count < length, fill() {}
                let body = String(decoding: input.prefix(length), as: UTF8.self)
                input.removeFirst(min(length, input.count))
                return (status, head, body)
            }
            guard fill() else { return (0, "", "") }
        }
    }

    func upgrade(path: String = "/ws", host: String = "localhost", origin: String? = nil) -> Int {
        request("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + (origin.map { "Origin: \($0)\r\n" } ?? "") +
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").status
    }

    func sendText(_ text: String) { send(clientFrame(1, Array(text.utf8))) }

    /// The next frame from the server: opcode and payload; nil at EOF or after 3 s.
    func frame() -> (opcode: UInt8, payload: [UInt8])? {
        while true {
            if input.count >= 2 {
                var length = Int(input[1] & 0x7f), header = 2
                if length == 126, input.count >= 4 { length = Int(input[2]) << 8 | Int(input[3]); header = 4 }
                if length == 127, input.count >= 10 { length = input[2..<10].reduce(0) { $0 << 8 | Int($1) }; header = 10 }
                if input.count >= header + length, !(length >= 126 && header == 2) {
                    let frame = (input[0] & 0x0f, Array(input[header..<(header + length)]))
                    input.removeFirst(header + length)
                    return frame
                }
            }
            guard fill() else { return nil }
        }
    }

    /// The next signaling line (on the TCP listener, plain or TLS); nil at EOF or after 3 s.
    func receiveMessage() -> SignalingMessage? {
        while true {
            if let end = input.firstIndex(of: 0x0a) {
                let line = Array(input[..<end])
                input.removeSubrange(...end)
                return try? SignalingMessage(parsing: line)
            }
            guard fill() else { return nil }
        }
    }

    /// The next signaling message (a text frame), skipping nothing else.
    func message() -> SignalingMessage? {
        guard let (opcode, payload) = frame(), opcode == 1 else { return nil }
        return try? SignalingMessage(parsing: payload)
    }

    /// The close frame's status code, when the next frame is one.
    func closeCode() -> UInt16? {
        while let (opcode, payload) = frame() {
            if opcode == 8 { return payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 0 }
        }
        return nil
    }

    func isClosedByServer() -> Bool {
        while fill() {}
        return true
    }
}

@Suite(.serialized) struct WebSignalingTests {
    @Test func thePageAndItsScriptAreServedWithASecurityPolicy() throws {
        let server = try startWebServer()
        defer { server.stop() }
        let port = try #require(server.webPort)
        let page = try WebClient(port: port).request("GET /?room=lab&token=x HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(page.status == 200)
        #expect(page.head.contains("Content-Type: text/html"))
        #expect(page.head.contains("Content-Security-Policy: default-src 'self'"))
        #expect(page.head.contains("Referrer-Policy: no-referrer"))
        #expect(page.body.contains("<script src=\"/app.js\"></script>"))
        let script = try WebClient(port: port).request("GET /app.js HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(script.status == 200 && script.head.contains("text/javascript") && script.body.contains("new RTCPeerConnection"))
    }

    @Test func badRequestsAndHandshakesGetTheirStatus() throws {
        let server = try startWebServer()
        defer { server.stop() }
        let port = try #require(server.webPort)
        let cases: [(String, Int)] = [
            ("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 405),
            ("GET /etc/passwd HTTP/1.1\r\nHost: localhost\r\n\r\n", 404),
            ("GET /ws HTTP/1.1\r\nHost: localhost\r\n\r\n", 426),
            ("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n", 400),
            ("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n", 426),
            ("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: bm90IHNpeHRlZW4=\r\nSec-WebSocket-Version: 13\r\n\r\n", 400),
            ("\u{0}\u{1}garbage\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n", 431),
        ]
        for (request, status) in cases {
            let client = try WebClient(port: port)
            #expect(client.request(request).status == status, "\(request.prefix(60))")
            #expect(client.isClosedByServer())
        }
    }

    /// A browser's signaling is the same protocol: it joins with the same tokens and calls a TCP participant.
    @Test func aWebSocketParticipantCallsATCPParticipant() async throws {
        let server = try startWebServer()
        defer { server.stop() }
        let browser = try WebClient(port: try #require(server.webPort))
        #expect(browser.upgrade() == 101)
        browser.sendText(#"{"type":"join","room":"lab","token":"\#(joinToken("browser"))"}"#)
        #expect(browser.message() == .joined(room: "lab", participant: "browser", peers: []))
        let (endpoint, log) = makeClient(port: server.port, identity: "roof")
        defer { endpoint.stop() }
        #expect(await log.wait(isJoined) == .joined(participant: "roof", peers: ["browser"], rejoined: false))
        #expect(browser.message() == .peerJoined(participant: "roof", rejoin: false))
        endpoint.send(RelayMessage(kind: .offer, id: "o1", to: "browser", payload: .object(["type": .string("offer"), "sdp": .string("v=0")])))
        #expect(browser.message() == .relay(RelayMessage(kind: .offer, id: "o1", from: "roof", to: "browser",
                                                         payload: .object(["type": .string("offer"), "sdp": .string("v=0")]))))
        // A message in three fragments, with a ping between them.
        let answer = Array(#"{"type":"answer","id":"a1","to":"roof","payload":{"type":"answer","sdp":"v=0"}}"#.utf8)
        browser.send(clientFrame(1, Array(answer[0..<10]), fin: false) + clientFrame(9, [7]) +
                     clientFrame(0, Array(answer[10..<30]), fin: false) + clientFrame(0, Array(answer[30...])))
        let pong = browser.frame()
        #expect(pong?.opcode == 0xA && pong?.payload == [7])
        #expect(browser.message() == .ack(id: "a1"))
        #expect(await log.wait { if case .message(let m) = $0 { return m.kind == .answer && m.from == "browser" }; return false } != nil)
        // Bad tokens get the same codes.
        let forger = try WebClient(port: try #require(server.webPort))
        #expect(forger.upgrade() == 101)
        forger.sendText(#"{"type":"join","room":"lab","token":"a.b.c"}"#)
        #expect(errorCodeOf(forger.message()) == .tokenMalformed)
        // The browser closes: the endpoint hears it left.
        browser.send(clientFrame(8, [0x03, 0xe8]))
        #expect(browser.closeCode() == 1000)
        #expect(await log.wait { if case .peerLeft("browser", _) = $0 { return true }; return false } != nil)
    }

    /// A page of another site cannot use the service: not under a name of its own that resolves
    /// here (DNS rebinding: Host), nor by opening /ws from its own origin with a token it holds.
    /// The service's own page, allowed origins and hosts, and clients that are no browser can.
    @Test func hostAndOriginAreChecked() throws {
        let server = try startWebServer(allowedOrigins: ["https://app.example.org"], allowedHosts: ["signal.example.org"])
        defer { server.stop() }
        let port = try #require(server.webPort)
        for (host, status) in [("evil.example", 421), ("evil.example:\(port)", 421), ("127.0.0.1:\(port)", 200), ("[::1]:\(port)", 200),
                               ("localhost:\(port)", 200), ("signal.example.org", 200), ("SIGNAL.example.org:\(port)", 200)] {
            #expect(try WebClient(port: port).request("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n").status == status, "Host \(host)")
        }
        #expect(try WebClient(port: port).upgrade(host: "evil.example") == 421)
        for (origin, status) in [("http://evil.example", 403), ("null", 403), ("http://localhost:\(port + 1)", 403), ("https://localhost:\(port)", 403),
                                 ("http://localhost:\(port)", 101), ("https://app.example.org", 101), ("https://app.example.org:443", 101)] {
            #expect(try WebClient(port: port).upgrade(host: "localhost:\(port)", origin: origin) == status, "Origin \(origin)")
        }
        // No Origin: a client that is no browser.
        #expect(try WebClient(port: port).upgrade(host: "localhost:\(port)") == 101)
        // Over TLS, the certificate's names are served and the page's origin is https.
        let cert = try TestCertificate(commonName: "signal.test")
        let secure = try startWebServer(tls: try TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        defer { secure.stop() }
        let securePort = try #require(secure.webPort)
        let trust = try TLSContext(trustedCAFile: cert.certificate)
        #expect(try WebClient(port: securePort, tls: trust, serverName: "signal.test").upgrade(host: "signal.test:\(securePort)", origin: "https://signal.test:\(securePort)") == 101)
        #expect(try WebClient(port: securePort, tls: trust, serverName: "signal.test").upgrade(host: "signal.test:\(securePort)", origin: "http://signal.test:\(securePort)") == 403)
        #expect(try WebClient(port: securePort, tls: trust, serverName: "signal.test").request("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n").status == 421)
    }

    @Test func hostileFramesCloseWithTheirCode() throws {
        let server = try startWebServer()
        defer { server.stop() }
        let port = try #require(server.webPort)
        let cases: [([UInt8], UInt16)] = [
            (clientFrame(1, Array("{}".utf8), masked: false), 1002),
            (clientFrame(2, [1, 2, 3]), 1003),
            (clientFrame(1, [0xff, 0xfe]), 1007),
            (clientFrame(0, [0x61]), 1002),
        ]
        for (bytes, code) in cases {
            let client = try WebClient(port: port)
            #expect(client.upgrade() == 101)
            client.send(bytes)
            #expect(client.closeCode() == code)
            #expect(client.isClosedByServer())
        }
        // A message over the limit: the TCP protocol's error code, then close 1009.
        let big = try WebClient(port: port)
        #expect(big.upgrade() == 101)
        big.send(clientFrame(1, [UInt8](repeating: 0x61, count: SignalingMessage.maxLineLength + 1)))
        #expect(errorCodeOf(big.message()) == .lineTooLong)
        #expect(big.closeCode() == 1009)
    }

    @Test func floodsOfMessagesAndOfPingsAreCut() throws {
        let server = try startWebServer()
        defer { server.stop() }
        let port = try #require(server.webPort)
        let chatty = try WebClient(port: port)
        #expect(chatty.upgrade() == 101)
        chatty.send((0..<300).flatMap { _ in clientFrame(1, Array(#"{"type":"ping"}"#.utf8)) })
        var codes: [SignalingErrorCode] = []
        while let (opcode, payload) = chatty.frame(), opcode == 1 {
            if let code = errorCodeOf(try? SignalingMessage(parsing: payload)) { codes.append(code) }
        }
        #expect(codes == [.rateLimited])
        let pinger = try WebClient(port: port)
        #expect(pinger.upgrade() == 101)
        pinger.send((0..<300).flatMap { _ in clientFrame(9, []) })
        #expect(pinger.closeCode() == 1008)
    }

    /// With --tls-cert/--tls-key the web side is HTTPS and WSS, checked against the CA like any TLS client.
    @Test func theWebSideSpeaksTLSWhenTheServiceHasACertificate() throws {
        let cert = try TestCertificate()
        let server = try startWebServer(tls: try TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        defer { server.stop() }
        let port = try #require(server.webPort)
        let trust = try TLSContext(trustedCAFile: cert.certificate)
        #expect(try WebClient(port: port, tls: trust).request("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").status == 200)
        let browser = try WebClient(port: port, tls: trust)
        #expect(browser.upgrade() == 101)
        browser.sendText(#"{"type":"join","room":"lab","token":"\#(joinToken("browser"))"}"#)
        #expect(browser.message() == .joined(room: "lab", participant: "browser", peers: []))
        // Plain HTTP to the TLS port gets nothing useful, and a client that does not trust the certificate is refused.
        #expect(try WebClient(port: port).request("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").status == 0)
        let other = try TestCertificate()
        #expect(throws: TLSError.self) { _ = try WebClient(port: port, tls: try TLSContext(trustedCAFile: other.certificate)) }
    }

    @Test func theLimitsHoldBeforeTheUpgrade() async throws {
        var limits = ServerLimits()
        limits.maxConnectionsPerAddress = 2
        limits.joinTimeout = .milliseconds(300)
        let server = try startWebServer(limits: limits)
        defer { server.stop() }
        let port = try #require(server.webPort)
        let first = try WebClient(port: port), second = try WebClient(port: port)
        #expect(first.upgrade() == 101)
        _ = second
        let third = try WebClient(port: port)
        let refused = third.request("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(refused.status == 503 && refused.body.contains("address_limit"))
        // A connection that never finishes its request is closed at the join timeout.
        let timedOut = second.request("")
        #expect(timedOut.status == 408)
        #expect(errorCodeOf(first.message()) == .joinTimeout)
        #expect(first.closeCode() == 1000)
    }
}
