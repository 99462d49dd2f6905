@testable import EndpointSignaling
import Foundation
import Platform
@testable import SignalingService
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint
import RTPTransport
@testable import Signaling

/// One session's bad offer or answer is refused to that session (a bye with the reason and a
/// status; a WHIP POST's 422) and the endpoint goes on: before, the error thrown out of the
/// negotiation ended `callend join` with exit code 1, 10 ms after the offer came.
@Suite(.serialized) struct BadSessionTests {
    /// A participant that speaks raw signaling: what it sends and what it hears.
    final class RawParticipant: Sendable {
        let client: SignalingClient
        let heard = Box()
        let joined = DispatchSemaphore(value: 0)
        final class Box: Sendable {
            let messages = Mutex<[RelayMessage]>([])
            func withLock<R>(_ body: (inout [RelayMessage]) -> R) -> R { messages.withLock { body(&$0) } }
        }

        convenience init(_ service: TestService, identity: String) throws {
            try self.init(port: service.server.port, token: try service.options(identity).token, identity: identity)
        }

        init(port: Int, token: String, identity: String) throws {
            var configuration = SignalingClientConfiguration(host: "127.0.0.1", port: port, room: "lab", token: { token })
            let (heard, joined) = (heard, joined)
            configuration.eventHandler = { event in
                if case .joined = event { joined.signal() }
                if case .message(let message) = event { heard.withLock { $0.append(message) } }
            }
            client = SignalingClient(configuration: configuration)
            client.start()
            #expect(joined.wait(timeout: 10), "\(identity) joined")
        }
        deinit { client.stop() }

        func offer(_ sdp: String, to peer: String) {
            _ = client.send(RelayMessage(kind: .offer, id: "", to: peer, payload: .object(["type": .string("offer"), "sdp": .string(sdp)])))
        }

        /// The refusal `peer` sent back: its reason and status.
        func refusal(from peer: String, within seconds: Double = 10) -> (reason: String, status: Int)? {
            var found: (String, Int)?
            _ = eventually(seconds) {
                found = heard.withLock { messages in
                    messages.lazy.filter { $0.kind == .bye && $0.from == peer }.compactMap { m in
                        m.payload["status"]?.integer().map { (m.payload["reason"]?.stringValue ?? "", $0) }
                    }.first
                }
                return found != nil
            }
            return found
        }
    }

    static let dataChannelsOnly = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n"
        + "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\n"
        + "a=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\n"
        + "a=setup:actpass\r\na=sctp-port:5000\r\n"

    /// An unparsable offer and an offer of data channels only, from a participant of the room:
    /// each gets a bye with 422 and why, the endpoint stays, and a real peer then calls it.
    @Test func badOffersAreRefusedAndTheEndpointCallsTheNextPeer() throws {
        let service = try TestService(maxParticipants: 3)
        let events = EventRecorder()
        let alice = try service.connect("alice", media: try Call.Media.synthetic(width: 160, height: 120), seconds: 60, delegate: events)
        defer { alice.disconnect() }
        let mallory = try RawParticipant(service, identity: "mallory")
        mallory.offer("this is not SDP", to: "alice")
        let first = try #require(mallory.refusal(from: "alice"), "alice refuses the unparsable offer")
        #expect(first.status == 422 && first.reason.contains("SDP"), "\(first)")
        mallory.heard.withLock { $0.removeAll() }
        mallory.offer(Self.dataChannelsOnly, to: "alice")
        let second = try #require(mallory.refusal(from: "alice"), "alice refuses the data-channel-only offer")
        #expect(second.status == 422 && second.reason.contains("nothing in the offer that callend speaks"), "\(second)")
        // Alice is still there, waiting: a real peer gets a call.
        try expectACall(with: service, "bob decodes alice's video after the refusals")
    }

    /// A peer joins `service`'s room and decodes the video of the endpoint already there.
    func expectACall(with service: TestService, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let renderer = RecordingRenderer()
        var bobMedia = try Call.Media.synthetic(width: 160, height: 120)
        bobMedia.renderers = [renderer]
        let bob = try service.connect("bob", media: bobMedia, seconds: 30)
        defer { bob.disconnect() }
        #expect(eventually(20) { renderer.frames > 10 }, comment, sourceLocation: sourceLocation)
    }

    /// A peer whose answer callend cannot use: the offer it answered ends and the peer hears
    /// why, and the endpoint takes the next peer.
    @Test func aBadAnswerIsRefusedAndTheEndpointGoesOn() throws {
        let service = try TestService(maxParticipants: 3)
        let mallory = try RawParticipant(service, identity: "mallory")
        // Alice joins second, so she offers to mallory, who answers with nonsense.
        let alice = try service.connect("alice", media: try Call.Media.synthetic(width: 160, height: 120), seconds: 60)
        defer { alice.disconnect() }
        #expect(eventually(10) { mallory.heard.withLock { $0.contains { $0.kind == .offer && $0.from == "alice" } } }, "alice offers")
        _ = mallory.client.send(RelayMessage(kind: .answer, id: "", to: "alice", payload: .object(["type": .string("answer"), "sdp": .string("v=0\r\nm=video 0 RTP/AVP 0\r\n")])))
        let refusal = try #require(mallory.refusal(from: "alice"))
        #expect(refusal.status == 422 && refusal.reason.contains("answer"), "\(refusal)")
        // Mallory leaves (a newcomer offers to the first of the room's others).
        mallory.client.stop()
        #expect(eventually(10) { service.server.statistics.connections == 1 }, "mallory gone")
        try expectACall(with: service, "bob decodes alice's video")
    }

    /// In a mesh, a participant's bad offers are refused to it alone, and the mesh takes the next peer.
    @Test func aMeshRefusesABadOfferAndTakesTheNextPeer() throws {
        let service = try LabService(maxParticipants: 4)
        defer { service.server.stop() }
        let logs = LogLines()
        let a = try MeshCall(options: try ConnectOptions(token: service.token("a")) { $0.roomName = "lab" }, server: ("127.0.0.1", service.port),
                             media: try Call.Media.synthetic(width: 160, height: 120), duration: .seconds(60), log: logs.sink)
        let ended = DispatchSemaphore(value: 0)
        startThread(named: "mesh-a") {
            _ = try? a.run()
            ended.signal()
        }
        defer {
            a.stop()
            ended.wait()
        }
        #expect(eventually(10) { logs.contains("joined room lab") })
        let mallory = try RawParticipant(port: service.port, token: service.token("mallory"), identity: "mallory")
        for sdp in ["this is not SDP", Self.dataChannelsOnly] {
            mallory.heard.withLock { $0.removeAll() }
            mallory.offer(sdp, to: "a")
            let refusal = try #require(mallory.refusal(from: "a"), "the mesh refuses \(sdp.prefix(20))")
            #expect(refusal.status == 422, "\(refusal)")
        }
        let b = try MeshCall(options: try ConnectOptions(token: service.token("b")) { $0.roomName = "lab" }, server: ("127.0.0.1", service.port),
                             media: try Call.Media.synthetic(width: 160, height: 120), duration: .seconds(30), log: LogLines().sink)
        let bEnded = DispatchSemaphore(value: 0)
        startThread(named: "mesh-b") {
            _ = try? b.run()
            bEnded.signal()
        }
        defer {
            b.stop()
            bEnded.wait()
        }
        #expect(eventually(20) { logs.contains("mesh: b: dtls: connected") }, "a connects to b after the refusals")
    }

    /// A WHIP POST with a malformed SDP to /whip/ROOM, with a good token for the room: 422 with
    /// the reason, and the room's endpoint still there for the next publisher or peer.
    @Test func aMalformedWHIPOfferIs422AndTheEndpointStays() throws {
        let secret = TokenSecret.random()
        var configuration = SignalingServerConfiguration(host: "127.0.0.1", port: 0, secret: secret)
        configuration.web = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        defer { server.stop() }
        let now = Int64(Date().timeIntervalSince1970)
        func token(_ who: String, can: TokenScope = .join) -> String {
            var claims = TokenClaims(identity: who, room: "lab", issuedAt: now, expires: now + 600)
            claims.can = can
            return TokenIssuer(secret: secret).mint(claims)
        }
        let alice = try Room.connect(options: try ConnectOptions(token: token("alice")) { $0.roomName = "lab" }, server: ("127.0.0.1", server.port),
                                     media: try Call.Media.synthetic(width: 160, height: 120), duration: .seconds(60))
        defer { alice.disconnect() }
        #expect(eventually(10) { server.statistics.rooms == 1 })
        let url = try HTTPURL(parsing: "http://127.0.0.1:\(try #require(server.webPort))/whip/lab")
        for body in ["v=0\r\nthis is no offer\r\n", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 VP8/90000\r\n"] {
            let response = try HTTPClient(timeout: .seconds(15)).send(HTTPRequest(method: "POST", url: url, fields: [
                ("Host", "127.0.0.1"), ("Content-Type", "application/sdp"), ("Authorization", "Bearer \(token("publisher", can: .publish))")], body: Array(body.utf8)))
            #expect(response.status == 422, "\(response.status) \(response.text)")
        }
        // The endpoint is still in its room: a peer gets a call.
        let renderer = RecordingRenderer()
        var bobMedia = Call.Media.init(videoTrack: nil, audioTrack: nil)
        bobMedia.renderers = [renderer]
        let bob = try Room.connect(options: try ConnectOptions(token: token("bob")) { $0.roomName = "lab" }, server: ("127.0.0.1", server.port),
                                   media: bobMedia, duration: .seconds(30))
        defer { bob.disconnect() }
        #expect(eventually(20) { renderer.frames > 10 }, "bob decodes alice's video after the refused POSTs")
    }
}
