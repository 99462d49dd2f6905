@testable import EndpointSignaling
import Foundation
@testable import SignalingService
import Synchronization
import Testing
import TestSupport
@testable import Signaling

/// WHIP/WHEP on the web side over real sockets: bodies read by their length, CORS, and hostile
/// requests answered with status codes while the service goes on.
@Suite struct WebRTCHTTPServerTests {
    static let offer = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"

    func post(_ server: SignalingServer, path: String = "/whep/lab", token: String? = joinToken("phone", can: .watch), type: String = "application/sdp",
              body: String = offer, extra: String = "") throws -> (status: Int, head: String, body: String) {
        let client = try WebClient(port: server.webPort!)
        return client.request("POST \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Type: \(type)\r\n" + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "")
                              + extra + "Content-Length: \(body.utf8.count)\r\n\r\n" + body)
    }

    @Test func anOfferReachesTheEndpointAndItsAnswerTheClient() throws {
        let server = try startWebServer()
        defer { server.stop() }
        // The endpoint answers the offer it hears on its client's own thread, as a callend join
        // does (the test's tasks share the pool with blocking tests, which can starve them).
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenIssuer(secret: testSecret).mint(TokenClaims(identity: "roof", room: "lab", issuedAt: now, expires: now + 600))
        var configuration = SignalingClientConfiguration(host: "127.0.0.1", port: server.port, room: "lab", token: { token }, tls: nil)
        let endpoint = Mutex<SignalingClient?>(nil)
        let heard = Mutex<RelayMessage?>(nil)
        let joined = DispatchSemaphore(value: 0)
        configuration.eventHandler = { event in
            switch event {
            case .joined: joined.signal()
            case .message(let offer) where offer.kind == .offer:
                heard.withLock { $0 = offer }
                _ = endpoint.withLock { $0 }?.send(RelayMessage(kind: .answer, id: "a", to: offer.from,
                                                               payload: .object(["type": .string("answer"), "sdp": .string("v=0\r\nanswer")])))
            default: break
            }
        }
        let client = SignalingClient(configuration: configuration)
        endpoint.withLock { $0 = client }
        client.start()
        defer { client.stop() }
        #expect(joined.wait(timeout: .now() + 30) == .success)
        // The head and the body in pieces, as a slow client sends them.
        let web = try WebClient(port: server.webPort!)
        var patience = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(web.fd, SOL_SOCKET, SO_RCVTIMEO, &patience, socklen_t(MemoryLayout<timeval>.size))
        let head = "POST /whep/lab HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sdp\r\nAuthorization: Bearer \(joinToken("phone", can: .watch))\r\nContent-Length: \(Self.offer.utf8.count)\r\n\r\n"
        web.send(Array(head.utf8))
        web.send(Array(Self.offer.utf8.prefix(10)))
        let response = web.request(String(decoding: Self.offer.utf8.dropFirst(10), as: UTF8.self))
        let offer = heard.withLock { $0 }
        #expect(offer?.payload["via"]?.stringValue == "whep" && offer?.payload["sdp"]?.stringValue == Self.offer && offer?.from?.hasPrefix("whep~") == true)
        #expect(response.status == 201 && response.body == "v=0\r\nanswer", "\(response)")
        #expect(response.head.contains("\r\nLocation: /whep/lab/") && response.head.contains("\r\nETag: \"") && response.head.contains("Content-Type: application/sdp"))
    }

    @Test func hostileRequestsGetStatusCodesAndTheServiceGoesOn() throws {
        let server = try startWebServer(allowedOrigins: ["https://player.example.org"])
        defer { server.stop() }
        #expect(try post(server).status == 404, "nobody in the room")
        #expect(try post(server, token: nil).status == 401)
        #expect(try post(server, token: "x.y.z").status == 401)
        #expect(try post(server, type: "text/plain").status == 415)
        #expect(try post(server, path: "/whep/bad%20room").status == 404)
        #expect(try post(server, path: "/whep/lab/nosuch").status == 405)
        #expect(try post(server, extra: "Origin: https://evil.example\r\n").status == 403)
        let client = try WebClient(port: server.webPort!)
        #expect(client.request("POST /whep/lab HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999\r\n\r\n").status == 413)
        // Content-Length is one number of digits: two of them, a list, a sign are refused, not guessed at.
        for length in ["5\r\nContent-Length: 5", "5, 9", "+5", "-1", "0x10", " ", "1e3"] {
            let refused = try WebClient(port: server.webPort!)
            #expect(refused.request("POST /whep/lab HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(length)\r\n\r\nhello").status == 400, "\(length)")
        }
        // A PATCH body is smaller than a POST's: a 30 KB trickle is refused before it is read.
        let bigPatch = try WebClient(port: server.webPort!)
        #expect(bigPatch.request("PATCH /whep/lab/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 30000\r\n\r\n").status == 413)
        let chunked = try WebClient(port: server.webPort!)
        #expect(chunked.request("POST /whep/lab HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n").status == 411)
        let patch = try WebClient(port: server.webPort!)
        #expect(patch.request("PATCH /whep/lab/nosuch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(joinToken("phone", can: .watch))\r\nContent-Type: \(ICEFragment.contentType)\r\nContent-Length: 0\r\n\r\n").status == 404)
        // A browser's preflight from an allowed origin: the methods and fields a WHEP player needs.
        let preflight = try WebClient(port: server.webPort!).request("OPTIONS /whep/lab HTTP/1.1\r\nHost: localhost\r\nOrigin: https://player.example.org\r\nAccess-Control-Request-Method: POST\r\n\r\n")
        #expect(preflight.status == 204)
        for field in ["Access-Control-Allow-Origin: https://player.example.org", "Access-Control-Allow-Methods: POST, OPTIONS",
                      "Access-Control-Allow-Headers: Authorization, Content-Type, If-Match", "Access-Control-Expose-Headers: Location, ETag, Link"] {
            #expect(preflight.head.contains(field), "\(field)")
        }
        // A flood of bad requests, each answered, and the page still served after it.
        for _ in 0..<200 { #expect(try post(server, token: "x").status == 401) }
        #expect(try WebClient(port: server.webPort!).request("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").status == 200)
    }
}
