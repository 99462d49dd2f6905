import Foundation
@testable import SignalingService
import Testing
@testable import Signaling

@Suite struct ICEServerPolicyTests {
    /// The credential is what TURN's REST scheme says, computed by Python's own hmac module
    /// (the scheme coturn's use-auth-secret checks).
    @Test func turnCredentialsMatchAnOutsideHMAC() throws {
        let (username, credential) = ICEServerPolicy.turnCredential(secret: Array("north-roof-secret".utf8), room: "lab", identity: "roof-1", expires: 1_800_000_000)
        #expect(username == "1800000000:lab:roof-1")
        let reference = try python("""
            import base64, hashlib, hmac, sys
            print(base64.b64encode(hmac.new(sys.argv[1].encode(), sys.argv[2].encode(), hashlib.sha1).digest()).decode())
            """, ["north-roof-secret", username])
        #expect(credential == reference)
    }

    /// joined carries STUN as given and TURN with a credential of the participant's own, for
    /// its room, that lives no longer than its token.
    @Test func joinedHandsOutServers() throws {
        let policy = ICEServerPolicy(stunURLs: ["stun:198.51.100.1:3478"], turnURLs: ["turn:198.51.100.1:3478?transport=udp", "turn:198.51.100.1:3478?transport=tcp"],
                                     turnSecret: Array("s3cret".utf8), credentialLifetime: 600)
        let h = CoreHarness(iceServers: policy)
        guard case .send(1, .joined(_, "a", [], let servers))? = h.join(1, identity: "a").first else {
            Issue.record("no joined")
            return
        }
        #expect(servers.count == 2 && servers[0] == ICEServerInfo(urls: ["stun:198.51.100.1:3478"]))
        #expect(servers[1].urls.count == 2 && servers[1].username == "\(h.wallClock + 600):lab:a")
        #expect(servers[1].credential == ICEServerPolicy.turnCredential(secret: Array("s3cret".utf8), room: "lab", identity: "a", expires: h.wallClock + 600).credential)
        // A token with 90 s left gets a TURN credential for 90 s; its renewal, one for as long as it.
        let short = mint(identity: "b", issuedAt: h.wallClock - 10, ttl: 100)
        guard case .send(2, .joined(_, "b", _, let shortServers))? = h.join(2, identity: "b", token: short).first else {
            Issue.record("no joined for b")
            return
        }
        #expect(shortServers[1].username == "\(h.wallClock + 90):lab:b")
        h.wallClock += 80
        let renewal = h.tick().compactMap { action -> (Int64, [ICEServerInfo])? in
            if case .send(2, .token(_, let expires, let servers)) = action { return (expires, servers) }
            return nil
        }.first
        #expect(renewal.map { $0.1.count == 2 && $0.1[1].username == "\($0.0):lab:b" } == true, "\(String(describing: renewal))")
        // The wire form parses back the same.
        let line = SignalingMessage.joined(room: "lab", participant: "a", peers: [], iceServers: servers).serialized()
        #expect(try SignalingMessage(parsing: line.dropLast()) == .joined(room: "lab", participant: "a", peers: [], iceServers: servers))
        // Without a TURN secret, TURN is not handed out.
        #expect(ICEServerPolicy(turnURLs: ["turn:x:1"]).servers(for: "a", room: "lab", now: 0, notAfter: 100).isEmpty)
    }
}
