import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Signaling

/// WHIP/WHEP on the web side over real sockets: bodies read by their length, CORS, and hostile
/// requests answered with status codes while the service goes on.
@Suite struct WebRTCHTTPServerTests {
    static let offer = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"

    func post(_ server: SignalingServer, path: String = "/whep/lab", token: String? = joinToken("phone"), type: String = "application/sdp",
              body: String = offer, extra: String = "") throws -> (status: Int, head: String, body: String) {
        let client = try WebClient(port: server.webPort!)
        return client.request("POST \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Type: \(type)\r\n" + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "")
                              + extra + "Content-Length: \(body.utf8.count)\r\n\r\n" + body)
    }

    @Test func anOfferReachesTheEndpointAndItsAnswerTheClient() async throws {
        let server = try startWebServer()
        defer { server.stop() }
        let (endpoint, log) = makeClient(port: server.port, identity: "roof")
        defer { endpoint.stop() }
        #expect(await log.wait(isJoined) != nil)
        // The client on a thread of its own (the test's tasks share the pool with blocking
        // tests): the head and the body in pieces, as a slow client sends them.
        let port = server.webPort!
        let result = Mutex<(status: Int, head: String, body: String)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let head = "POST /whep/lab HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sdp\r\nAuthorization: Bearer \(joinToken("phone"))\r\nContent-Length: \(Self.offer.utf8.count)\r\n\r\n"
        Thread.detachNewThread {
            guard let client = try? WebClient(port: port) else { done.signal(); return }
            client.send(Array(head.utf8))
            client.send(Array(Self.offer.utf8.prefix(10)))
            let response = client.request(String(decoding: Self.offer.utf8.dropFirst(10), as: UTF8.self))
            result.withLock { $0 = response }
            done.signal()
        }
        // The endpoint answers the offer it hears, as a callend join does.
        guard case .message(let offer)? = await log.wait({ if case .message(let m) = $0 { return m.kind == .offer }; return false }) else {
            done.wait()
            Issue.record("the offer did not reach the endpoint: \(log.all); the client got \(String(describing: result.withLock { $0 }))")
            return
        }
        #expect(offer.payload["via"]?.stringValue == "whep" && offer.payload["sdp"]?.stringValue == Self.offer)
        _ = endpoint.send(RelayMessage(kind: .answer, id: "a", to: offer.from, payload: .object(["type": .string("answer"), "sdp": .string("v=0\r\nanswer")])))
        done.wait()
        let response = try #require(result.withLock { $0 })
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
        let chunked = try WebClient(port: server.webPort!)
        #expect(chunked.request("POST /whep/lab HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n").status == 411)
        let patch = try WebClient(port: server.webPort!)
        #expect(patch.request("PATCH /whep/lab/nosuch HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(joinToken("phone"))\r\nContent-Type: \(ICEFragment.contentType)\r\nContent-Length: 0\r\n\r\n").status == 404)
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
