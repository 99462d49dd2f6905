import Foundation
@testable import SignalingService
import Testing
import TestSupport
@testable import Signaling

/// What keeps the service answering when some clients hold on without doing their part.
@Suite(.serialized) struct ServerStarvationTests {
    /// A TLS service with small limits: two handshakes per address block, four in all, and
    /// deadlines far beyond the test, so that whatever a client gets it owes to the limits'
    /// fairness, not to a timeout freeing a slot.
    static func tlsServer(_ cert: TestCertificate, maxHandshakes: Int = 4, firstByte: Duration = .seconds(60)) throws -> SignalingServer {
        var limits = ServerLimits()
        limits.maxTLSHandshakes = maxHandshakes
        limits.maxHandshakesPerAddress = 2
        limits.tlsHandshakeTimeout = .seconds(60)
        limits.firstByteTimeout = firstByte
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret, tls: try TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        configuration.limits = limits
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        return server
    }

    func metrics(_ server: SignalingServer) throws -> String {
        try WebClient(port: try #require(server.metricsPort)).request("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").body
    }

    func join(_ client: WebClient, as identity: String) -> SignalingMessage? {
        client.send(SignalingMessage.join(room: "lab", token: mint(identity: identity, issuedAt: Int64(Date().timeIntervalSince1970)), rejoin: false).serialized())
        return client.receiveMessage()
    }

    /// One address holds as many idle connections as it can (200, no byte sent): it keeps its
    /// two handshake slots and the rest are reset at once, and a client of another address
    /// completes its TLS join while those two are still held. Before, the idle connections
    /// filled every slot and a refused one's error waited for a handshake that never came.
    @Test func aClientOfAnotherAddressJoinsWhileOneAddressHoldsIdleConnections() throws {
        let cert = try TestCertificate()
        let server = try Self.tlsServer(cert)
        defer { server.stop() }
        // A reset can come before connect() returns on loopback: that one is refused too.
        var idle: [RawConnection] = [], resetAtConnect = 0
        for _ in 0..<200 {
            do { idle.append(try RawConnection(port: server.port, from: "127.0.0.1")) } catch { resetAtConnect += 1 }
        }
        let client = try WebClient(port: server.port, tls: try TLSContext(trustedCAFile: cert.certificate), from: "127.0.0.2")
        #expect(join(client, as: "genuine").map { if case .joined = $0 { true } else { false } } == true, "the client of another address joins")
        let reset = resetAtConnect + idle.filter { $0.isClosedByServer(within: .milliseconds(200)) }.count
        #expect(reset == 198, "all but two idle connections reset at once: \(reset)")
        let text = try metrics(server)
        #expect(text.contains(#"callend_signaling_refused_total{reason="handshake_slots"} 198"#), "\(text)")
        #expect(text.contains(#"callend_signaling_refused_total{reason="tls_handshake_timeout"} 0"#), "no slot was freed by a deadline")
    }

    /// Every slot held, by two addresses that each hold their share: a client of a third gets
    /// the oldest slot of one of them and joins.
    @Test func aFullServiceGivesANewAddressAFairSlot() throws {
        let cert = try TestCertificate()
        let server = try Self.tlsServer(cert)
        defer { server.stop() }
        let first = try (0..<2).map { _ in try RawConnection(port: server.port, from: "127.0.0.3") }
        let second = try (0..<2).map { _ in try RawConnection(port: server.port, from: "127.0.0.4") }
        let client = try WebClient(port: server.port, tls: try TLSContext(trustedCAFile: cert.certificate), from: "127.0.0.2")
        #expect(join(client, as: "genuine").map { if case .joined = $0 { true } else { false } } == true)
        let evicted = (first + second).filter { $0.isClosedByServer(within: .milliseconds(200)) }.count
        #expect(evicted == 1, "one held slot given up: \(evicted)")
        #expect(try metrics(server).contains(#"callend_signaling_refused_total{reason="handshake_evicted"} 1"#))
    }

    /// A connection that sends nothing is closed at the first-byte deadline, and counted.
    @Test func aSilentConnectionIsClosedAtTheFirstByteDeadline() throws {
        let cert = try TestCertificate()
        let server = try Self.tlsServer(cert, firstByte: .milliseconds(300))
        defer { server.stop() }
        let silent = try RawConnection(port: server.port)
        #expect(silent.isClosedByServer())
        #expect(try metrics(server).contains(#"callend_signaling_refused_total{reason="first_byte_timeout"} 1"#))
    }

    /// Idle TLS connections that never send a handshake leave the loop asleep: it wakes for its
    /// timers (four times a second), not for sockets that are always writable. Before, each
    /// refused one waited for writability to send its error through a handshake that never
    /// came, and the loop spun at 49-100 % of a core.
    @Test func idleTLSConnectionsDoNotWakeTheLoop() throws {
        let cert = try TestCertificate()
        let server = try Self.tlsServer(cert, maxHandshakes: 64)
        defer { server.stop() }
        // Eight are held (the address block's share of handshakes), the rest reset: some before
        // connect() returns on loopback.
        var idle: [RawConnection] = []
        for _ in 0..<40 { if let connection = try? RawConnection(port: server.port) { idle.append(connection) } }
        // Every connection has been accepted (each held, or reset) once the last is settled.
        #expect(idle.count < 40 || idle.last?.isClosedByServer(within: .seconds(2)) == true)
        let before = server.wakeups.load(ordering: .relaxed)
        let start = ContinuousClock.now
        usleep(1_000_000)  // a window to count the loop's wake-ups in: nothing is ordered by it
        let woke = server.wakeups.load(ordering: .relaxed) - before
        let seconds = (ContinuousClock.now - start).inSeconds
        #expect(Double(woke) <= 8 * seconds, "the loop woke \(woke) times in \(seconds) s with idle connections")
    }

    /// A metrics scraper that never finishes its request is closed at the metrics deadline;
    /// another is answered meanwhile.
    @Test func metricsRequestsHaveADeadline() throws {
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.limits.metricsTimeout = .seconds(1)
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        defer { server.stop() }
        let port = try #require(server.metricsPort)
        let slow = try WebClient(port: port)
        slow.send(Array("GET /metr".utf8))
        let started = ContinuousClock.now
        #expect(try WebClient(port: port).request("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").status == 200)
        #expect(slow.request("").status == 0, "the slow scraper was answered")
        #expect(ContinuousClock.now - started >= .milliseconds(900))
    }
}
