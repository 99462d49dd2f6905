import Foundation
@testable import SignalingService
import Testing
import TestSupport
@testable import Signaling

/// Redis is a trust boundary: what nodes tell each other through it is sealed with a key Redis
/// never sees, and Redis itself is reached over TLS as an ACL user.
@Suite(.serialized) struct ClusterSecurityTests {
    static let hasRedis = FileManager.default.isExecutableFile(atPath: RedisProcess.executable)

    func node(_ address: RedisAddress) throws -> SignalingServer {
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.redis = address
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        return server
    }

    func received(_ log: EventLog, id: String, from: String, timeout: Duration = .seconds(30)) async -> Bool {
        await log.wait(timeout: timeout) { if case .message(let m) = $0 { return m.id == id && m.from == from }; return false } != nil
    }

    @Test func envelopesAreSealedAndOnlyTheClustersAreTaken() throws {
        let envelope = ClusterEnvelope(secret: testSecret)
        let event = ClusterEvent(kind: .relay, room: "lab", to: "roof", who: "bench", detail: #"{"type":"offer"}"#)
        let sealed = envelope.seal(event, to: "node-a", from: "node-b", at: 1_000_000)
        #expect(envelope.open(sealed, for: "node-a", at: 1_000_500) == .success(event))
        #expect(envelope.open(sealed, for: "node-b", at: 1_000_500) == .failure(.misaddressed), "a copy replayed to another node")
        #expect(envelope.open(sealed, for: "node-a", at: 1_000_000 + ClusterEnvelope.maxAge + 1) == .failure(.stale))
        // One byte of the message changed: the MAC no longer matches.
        let swapped = sealed.replacingOccurrences(of: "offer", with: "offex")
        #expect(envelope.open(swapped, for: "node-a", at: 1_000_500) == .failure(.forged))
        // Sealed by someone with another key (Redis never has the cluster's).
        let other = ClusterEnvelope(secret: try TokenSecret(Array("another-secret-of-thirty-two-bytes!!".utf8)))
        #expect(envelope.open(other.seal(event, to: "node-a", from: "x", at: 1_000_000), for: "node-a", at: 1_000_500) == .failure(.forged))
        // What a Redis client could publish before: a plain JSON array.
        #expect(envelope.open(#"["relay","lab","roof","bench","{}"]"#, for: "node-a", at: 1_000_500) == .failure(.malformed))
    }

    /// A client of Redis publishes on a node's channel: an offer for its participant with a
    /// fingerprint of the forger's, in the format nodes used before, sealed with another key,
    /// a genuine envelope of another node's, and a stale one. Each is dropped and counted, the
    /// participant hears none, and the cluster's own relays go on.
    @Test(.enabled(if: hasRedis)) func aForgedEnvelopeIsDroppedAndCounted() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(RedisAddress(host: "127.0.0.1", port: redis.port)), b = try node(RedisAddress(host: "127.0.0.1", port: redis.port))
        defer { a.stop(); b.stop() }
        let (roof, roofLog) = makeClient(port: a.port, identity: "roof")
        #expect(await roofLog.wait(isJoined) != nil)
        let (bench, benchLog) = makeClient(port: b.port, identity: "bench")
        #expect(await benchLog.wait(isJoined) != nil)
        defer { roof.stop(); bench.stop() }
        let nodeA = try #require(a.directory?.node), nodeB = try #require(b.directory?.node)
        let forgedOffer = String(decoding: SignalingMessage.relay(RelayMessage(kind: .offer, id: "forged", from: "bench", to: "roof", payload: .object([
            "type": .string("offer"), "sdp": .string("v=0\r\na=fingerprint:sha-256 66:6F:72:67:65:64\r\n")]))).serialized().dropLast(), as: UTF8.self)
        let event = ClusterEvent(kind: .relay, room: "lab", to: "roof", who: "bench", detail: forgedOffer)
        let now = RedisRoomDirectory.wallClockMilliseconds
        let forgeries = [
            String(decoding: JSONValue.array(["relay", "lab", "roof", "bench", forgedOffer].map(JSONValue.string)).serialized, as: UTF8.self),
            ClusterEnvelope(secret: try TokenSecret(Array("another-secret-of-thirty-two-bytes!!".utf8))).seal(event, to: nodeA, from: nodeB, at: now),
            ClusterEnvelope(secret: testSecret).seal(event, to: nodeB, from: nodeA, at: now),
            ClusterEnvelope(secret: testSecret).seal(event, to: nodeA, from: nodeB, at: now - 2 * ClusterEnvelope.maxAge),
        ]
        let forger = RedisConnection(address: RedisAddress(host: "127.0.0.1", port: redis.port))
        for forgery in forgeries {
            #expect(try forger.command(["PUBLISH", RedisRoomDirectory.channel(of: nodeA), forgery]) == .integer(1), "a's subscriber got it")
        }
        // The cluster's own relay after them arrives; the forgeries never did.
        let genuine = bench.send(RelayMessage(kind: .candidate, id: "", to: "roof", payload: .object(["candidate": .string("c")])))
        #expect(await received(roofLog, id: genuine, from: "bench"))
        #expect(!roofLog.all.contains { if case .message(let m) = $0 { return m.id == "forged" }; return false }, "the forged offer reached roof")
        #expect(a.directory?.counters.envelopesRefused == 4)
        let metrics = try WebClient(port: try #require(a.metricsPort)).request("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").body
        #expect(metrics.contains("callend_signaling_redis_envelopes_refused_total 4"), "\(metrics)")
    }

    /// Debian's redis-server with TLS only and an ACL user (the default user off): two nodes
    /// reach it as rediss://USER:PASSWORD@ with its CA, and relay across it; a wrong password
    /// or plain TCP to its TLS port stops a node from starting, saying why.
    @Test(.enabled(if: hasRedis)) func nodesReachRedisOverTLSAsAnACLUser() async throws {
        let certificate = try TestCertificate(commonName: "localhost")
        let redis = try #require(try RedisProcess(tls: (certificate.certificate, certificate.key), users: [("callend", "s3cret-pass")]))
        var address = try RedisAddress(url: "rediss://callend:s3cret-pass@localhost:\(redis.port)")
        address.caFile = certificate.certificate
        let a = try node(address), b = try node(address)
        defer { a.stop(); b.stop() }
        let (roof, roofLog) = makeClient(port: a.port, identity: "roof")
        #expect(await roofLog.wait(isJoined) != nil)
        let (bench, benchLog) = makeClient(port: b.port, identity: "bench")
        #expect(await benchLog.wait(isJoined) == .joined(participant: "bench", peers: ["roof"], rejoined: false))
        defer { roof.stop(); bench.stop() }
        let offer = roof.send(RelayMessage(kind: .offer, id: "", to: "bench", payload: .object(["sdp": .string("v=0")])))
        #expect(await received(benchLog, id: offer, from: "roof"))
        let answer = bench.send(RelayMessage(kind: .answer, id: "", to: "roof", payload: .object(["sdp": .string("v=0")])))
        #expect(await received(roofLog, id: answer, from: "bench"))
        #expect(a.directory?.isHealthy == true && b.directory?.isHealthy == true)
        var wrong = address
        wrong.password = "not-it"
        #expect { try node(wrong) } throws: { "\($0)".contains("WRONGPASS") }
        var plain = address
        plain.tls = false
        #expect(throws: RedisError.self) { try node(plain) }
        var untrusted = address
        untrusted.caFile = nil
        #expect { try node(untrusted) } throws: { "\($0)".contains("TLS") }
    }
}
