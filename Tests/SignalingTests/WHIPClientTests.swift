import EndpointSignaling
import Foundation
import Signaling
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct HTTPURLTests {
    @Test(arguments: [
        ("https://whip.example.org/whip/live", true, "whip.example.org", 443, "/whip/live"),
        ("http://127.0.0.1:8080", false, "127.0.0.1", 8080, "/"),
        ("HTTPS://[::1]:9443/a?b=c#frag", true, "::1", 9443, "/a?b=c"),
        ("http://host?x=1", false, "host", 80, "/?x=1"),
    ])
    func parses(_ text: String, secure: Bool, host: String, port: Int, target: String) throws {
        let url = try HTTPURL(parsing: text)
        #expect(url.isSecure == secure && url.host == host && url.port == port && url.target == target)
    }

    @Test(arguments: ["ftp://x/y", "https://", "https://user:pw@host/", "http://host:0/", "http://host:70000/", "http://[::1/", "https://a b/", "whip.example.org/live"])
    func refuses(_ text: String) {
        #expect(throws: HTTPURL.Invalid.self) { try HTTPURL(parsing: text) }
    }

    @Test func resolvesLocations() throws {
        let base = try HTTPURL(parsing: "https://h:8443/whip/endpoint/live?x=1")
        #expect(try base.resolving("/whip/resource/1").description == "https://h:8443/whip/resource/1")
        #expect(try base.resolving("resource/2").description == "https://h:8443/whip/endpoint/resource/2")
        #expect(try base.resolving("//other/r").description == "https://other/r")
        #expect(try base.resolving("http://third:81/r#f").description == "http://third:81/r")
        #expect(throws: HTTPURL.Invalid.self) { try base.resolving("") }
        #expect(throws: HTTPURL.Invalid.self) { try base.resolving("/a\r\nInjected: 1") }
    }

    @Test func authorityLeavesOutTheDefaultPort() throws {
        #expect(try HTTPURL(parsing: "https://h:443/").authority == "h")
        #expect(try HTTPURL(parsing: "http://[fe80::1]:81/").authority == "[fe80::1]:81")
    }
}

@Suite struct HTTPResponseReaderTests {
    static let created = Array(("HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nLocation: /r/1\r\n"
                                + "Link: <stun:s.example:3478>; rel=\"ice-server\"\r\nLink: <turn:t.example?transport=udp>; rel=\"ice-server\"; username=\"u\"; credential=\"p,w\"\r\n"
                                + "Content-Length: 5\r\n\r\nv=0\r\n").utf8)

    @Test func readsAResponseGivenOneByteAtATime() throws {
        var reader = HTTPResponseReader()
        var response: HTTPResponseMessage?
        for (i, byte) in Self.created.enumerated() {
            let got = try reader.append([byte])
            if i < Self.created.count - 1 { #expect(got == nil) } else { response = got }
        }
        let r = try #require(response)
        #expect(r.status == 201 && r.reason == "Created" && r.text == "v=0\r\n")
        #expect(r.field("location") == "/r/1" && r.fields(named: "LINK").count == 2)
    }

    @Test func readsChunkedBodiesAndSkipsInterimResponses() throws {
        let bytes = Array("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nv=0\r\r\n3\r\n\nab\r\n0\r\nTrailer: x\r\n\r\n".utf8)
        for split in [1, 7, bytes.count] {
            var reader = HTTPResponseReader()
            var response: HTTPResponseMessage?
            var index = 0
            while index < bytes.count {
                let end = min(bytes.count, index + split)
                if let r = try reader.append(bytes[index..<end]) { response = r }
                index = end
            }
            let r = try #require(response)
            #expect(r.status == 200 && r.text == "v=0\r\nab")
        }
    }

    @Test func readsToTheCloseWithoutALength() throws {
        var reader = HTTPResponseReader()
        #expect(try reader.append(Array("HTTP/1.0 200 OK\r\n\r\nhello".utf8)) == nil)
        #expect(try reader.finish().text == "hello")
        var noContent = HTTPResponseReader()
        #expect(try noContent.append(Array("HTTP/1.1 204 No Content\r\nETag: \"2\"\r\n\r\n".utf8))?.field("etag") == "\"2\"")
    }

    @Test(arguments: [
        "HTTP/1.1 20 OK\r\n\r\n", "SIP/2.0 200 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nBad Line\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-ac\r\nabcd", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+4\r\nabcd\r\n",
    ])
    func refusesMalformedResponses(_ text: String) {
        var reader = HTTPResponseReader()
        #expect(throws: HTTPResponseReader.Malformed.self) { _ = try reader.append(Array(text.utf8)) }
    }

    @Test func boundsTheHeadAndCutShortBodies() throws {
        var reader = HTTPResponseReader()
        #expect(throws: HTTPResponseReader.Malformed.self) {
            _ = try reader.append(Array(("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: HTTPResponseReader.maxHeadLength)).utf8))
        }
        var cut = HTTPResponseReader()
        #expect(try cut.append(Array("HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nv=0".utf8)) == nil)
        #expect(throws: HTTPResponseReader.Malformed.self) { _ = try cut.finish() }
        var small = HTTPResponseReader(maxBodyLength: 4)
        _ = try small.append(Array("HTTP/1.1 200 OK\r\n\r\n1234".utf8))
        #expect(throws: HTTPResponseReader.Malformed.self) { _ = try small.append(Array("5".utf8)) }
    }
}

@Suite struct LinkFieldTests {
    @Test func readsICEServersFromLinkFields() {
        let links = LinkField.parse([
            "<stun:stun.example.net>; rel=\"ice-server\", <https://example.org/doc>; rel=\"help\"",
            "<turn:turn.example.net?transport=udp>; rel=\"ice-server\"; username=\"user\"; credential=\"pa\\\"ss, word\"; credential-type=\"password\"",
            "garbage without brackets",
        ])
        #expect(links.count == 3)
        let servers = LinkField.iceServers(links)
        #expect(servers == [ICEServerInfo(urls: ["stun:stun.example.net"]),
                            ICEServerInfo(urls: ["turn:turn.example.net?transport=udp"], username: "user", credential: "pa\"ss, word")])
    }

    @Test func serializedServersReadBack() {
        let server = ICEServerInfo(urls: ["turn:10.0.0.1:3478?transport=udp", "turn:10.0.0.1:3478?transport=tcp"], username: "1700000000:room", credential: "a\\b\"c")
        #expect(LinkField.iceServers(LinkField.parse(LinkField.serialize(server))) == server.urls.map {
            ICEServerInfo(urls: [$0], username: server.username, credential: server.credential)
        })
    }
}

@Suite struct ICEFragmentTests {
    @Test func readsTheFragmentOfARestart() throws {
        let text = "a=ice-options:trickle ice2\r\na=group:BUNDLE 0 1\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=ice-ufrag:EsAw\r\na=ice-pwd:P2uYro0UCOQ4zxjKXaWCBui1\r\n"
            + "a=candidate:1387637174 1 udp 2122260223 192.0.2.1 61764 typ host generation 0 ufrag EsAw network-id 1\r\na=end-of-candidates\r\n"
        let fragment = try ICEFragment(parsing: text)
        #expect(fragment.ufrag == "EsAw" && fragment.password == "P2uYro0UCOQ4zxjKXaWCBui1" && fragment.mid == "0")
        #expect(fragment.candidates == ["candidate:1387637174 1 udp 2122260223 192.0.2.1 61764 typ host generation 0 ufrag EsAw network-id 1"])
        #expect(fragment.endOfCandidates)
        #expect(try ICEFragment(parsing: fragment.serialized) == fragment)
    }

    @Test(arguments: ["", "a=ice-ufrag:x\r\n", "a=ice-pwd:y\n", "a=ice-ufrag:\r\na=ice-pwd:y\r\n"])
    func refusesAFragmentWithoutCredentials(_ text: String) {
        #expect(throws: ICEFragment.Malformed.self) { try ICEFragment(parsing: text) }
    }
}

/// A loopback HTTP server that answers each connection with the next scripted response (PORT in
/// it becomes the server's port) and keeps the requests it got.
final class ScriptedHTTPServer: Sendable {
    let port: Int
    private let fd: Int32
    private final class Received: Sendable { let requests = Mutex<[String]>([]) }
    private let received = Received()
    /// The requests so far, whole.
    var requests: [String] { received.requests.withLock { $0 } }

    init(responses: [String]) throws {
        let (listener, port) = try Self.listenOnLoopback()
        (fd, self.port) = (listener, port)
        let received = self.received
        Thread.detachNewThread {
            for response in responses {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                var bytesIn: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                // The head, then the body its Content-Length announces.
                while true {
                    let text = String(decoding: bytesIn, as: UTF8.self)
                    if let end = text.range(of: "\r\n\r\n") {
                        let length = text[..<end.lowerBound].split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                        if text.utf8.count - text.utf8.distance(from: text.startIndex, to: end.upperBound) >= length { break }
                    }
                    let n = buffer.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
                    if n <= 0 { break }
                    bytesIn += buffer[0..<n]
                }
                received.requests.withLock { $0.append(String(decoding: bytesIn, as: UTF8.self)) }
                let bytes = Array(response.replacingOccurrences(of: "PORT", with: String(port)).utf8)
                _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                close(connection)
            }
        }
    }

    deinit { close(fd) }

    /// A listening socket on 127.0.0.1 and its port.
    static func listenOnLoopback() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 8) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}

@Suite struct WHIPClientTests {
    static let answer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"

    func client(_ server: ScriptedHTTPServer, host: String = "127.0.0.1", path: String = "/whip/live") throws -> WHIPClient {
        WHIPClient(endpoint: try HTTPURL(parsing: "http://\(host):\(server.port)\(path)"), bearerToken: "t0ken", http: try HTTPClient(timeout: .seconds(5)))
    }

    @Test func postsTheOfferFollowsRedirectsAndReadsTheSession() throws {
        let server = try ScriptedHTTPServer(responses: [
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: /whip/other\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nLocation: session/42\r\nETag: \"e1\"\r\n"
                + "Link: <turn:127.0.0.1:3478?transport=udp>; rel=\"ice-server\"; username=\"u\"; credential=\"c\"\r\nContent-Length: \(Self.answer.utf8.count)\r\n\r\n\(Self.answer)",
        ])
        let resource = try client(server).post(offer: "v=0 offer")
        #expect(resource.answer == Self.answer && resource.etag == "\"e1\"")
        #expect(resource.location.description == "http://127.0.0.1:\(server.port)/whip/session/42")
        #expect(resource.iceServers == [ICEServerInfo(urls: ["turn:127.0.0.1:3478?transport=udp"], username: "u", credential: "c")])
        let requests = server.requests
        #expect(requests.count == 2)
        for (request, path) in zip(requests, ["/whip/live", "/whip/other"]) {
            #expect(request.hasPrefix("POST \(path) HTTP/1.1\r\n"))
            #expect(request.contains("\r\nContent-Type: application/sdp\r\n") && request.contains("\r\nAuthorization: Bearer t0ken\r\n") && request.hasSuffix("\r\n\r\nv=0 offer"))
        }
    }

    @Test func aRedirectToAnotherHostDoesNotCarryTheToken() throws {
        let server = try ScriptedHTTPServer(responses: [
            "HTTP/1.1 308 Permanent Redirect\r\nContent-Length: 0\r\nLocation: http://localhost:PORT/whip/live\r\n\r\n",
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nno\r\nno",
        ])
        // The redirect names the same port under another host name: the client must not trust it with the token.
        let error = #expect(throws: WHIPError.self) { try client(server).post(offer: "v=0") }
        #expect(error?.status == 401 && error?.description.contains("the server says: no") == true)
        let requests = server.requests
        #expect(requests.count == 2)
        #expect(requests.first?.contains("Authorization: Bearer t0ken") == true)
        #expect(requests.last?.contains("Authorization") == false)
    }

    @Test func patchesAndDeletesWithTheRightPreconditions() throws {
        let server = try ScriptedHTTPServer(responses: [
            "HTTP/1.1 204 No Content\r\nETag: \"e2\"\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Type: application/trickle-ice-sdpfrag\r\nETag: \"e3\"\r\nContent-Length: 45\r\n\r\na=ice-ufrag:srv2\r\na=ice-pwd:serverpassword2\r\n",
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        ])
        let whip = try client(server)
        var resource = WHIPResource(location: try HTTPURL(parsing: "http://127.0.0.1:\(server.port)/s/1"), etag: "\"e1\"", answer: "", iceServers: [],
                                    endpoint: whip.endpoint)
        #expect(try whip.patch(&resource, fragment: ICEFragment(ufrag: "u1", password: "p1", candidates: ["candidate:1 1 udp 1 10.0.0.1 9 typ host"]), restart: false) == nil)
        #expect(resource.etag == "\"e2\"")
        let answer = try whip.patch(&resource, fragment: ICEFragment(ufrag: "u2", password: "p2"), restart: true)
        #expect(answer?.ufrag == "srv2" && answer?.password == "serverpassword2" && resource.etag == "\"e3\"")
        let unsupported = #expect(throws: WHIPError.self) { _ = try whip.patch(&resource, fragment: ICEFragment(ufrag: "u2", password: "p2"), restart: false) }
        #expect(unsupported?.isUnsupported == true)
        try whip.delete(resource)  // 404: the session is gone either way
        let requests = server.requests
        #expect(requests[0].hasPrefix("PATCH /s/1 HTTP/1.1\r\n") && requests[0].contains("\r\nIf-Match: \"e1\"\r\n")
                && requests[0].contains("Content-Type: application/trickle-ice-sdpfrag") && requests[0].contains("a=candidate:1 1 udp"))
        #expect(requests[1].contains("\r\nIf-Match: \"*\"\r\n") && requests[1].contains("a=ice-ufrag:u2"))
        #expect(requests[3].hasPrefix("DELETE /s/1 HTTP/1.1\r\n") && requests[3].contains("Authorization: Bearer t0ken"))
    }

    @Test(arguments: [
        (401, "refused the bearer token"), (403, "403 Forbidden"), (404, "404 Not Found"), (409, "conflict (409)"),
        (415, "415 Unsupported Media Type"), (422, "422 Unprocessable"), (429, "retry after 9 s"), (502, "server failed (502"),
    ])
    func saysWhatARefusalMeans(_ status: Int, _ words: String) throws {
        let body = "said\u{7}\r\nthe rest"
        let server = try ScriptedHTTPServer(responses: ["HTTP/1.1 \(status) Whatever\r\nRetry-After: 9\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"])
        let error = #expect(throws: WHIPError.self) { try client(server).post(offer: "v=0") }
        #expect(error?.status == status)
        #expect(error?.description.contains(words) == true, "\(error?.description ?? "")")
        #expect(error?.description.contains("(the server says: said)") == true, "the body's first line, control characters removed")
    }

    @Test func aCreatedWithoutLocationIsAnError() throws {
        let server = try ScriptedHTTPServer(responses: ["HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 4\r\n\r\nv=0\n"])
        let error = #expect(throws: WHIPError.self) { try client(server).post(offer: "v=0") }
        #expect(error?.description.contains("without a Location") == true)
    }

    @Test func aServerThatNeverAnswersTimesOut() throws {
        // Accepted by the kernel (the backlog), never answered.
        let (listener, port) = try ScriptedHTTPServer.listenOnLoopback()
        defer { close(listener) }
        let whip = WHIPClient(endpoint: try HTTPURL(parsing: "http://127.0.0.1:\(port)/w"), bearerToken: nil,
                              http: try HTTPClient(timeout: .milliseconds(300)))
        let error = #expect(throws: WHIPError.self) { try whip.post(offer: "v=0") }
        #expect(error?.description.contains("no response within") == true)
    }
}
