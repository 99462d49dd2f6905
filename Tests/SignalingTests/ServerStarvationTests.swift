import Foundation
import Testing
import TestSupport
@testable import Signaling

/// What keeps the service answering when some clients hold on without doing their part.
@Suite(.serialized) struct ServerStarvationTests {
    /// TLS handshakes under way are bounded, and each has a deadline: connections that never
    /// say hello hold the listener for that long and no more, then a real client gets through.
    @Test func tlsHandshakesAreBoundedAndTimed() throws {
        let cert = try TestCertificate()
        var limits = ServerLimits()
        limits.maxTLSHandshakes = 2
        limits.tlsHandshakeTimeout = .milliseconds(800)
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret, tls: try TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        configuration.limits = limits
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        defer { server.stop() }
        let silent = try (0..<2).map { _ in try RawConnection(port: server.port) }
        let started = ContinuousClock.now
        // The third waits in the backlog until a silent one is dropped, then its handshake runs.
        let client = try WebClient(port: server.port, tls: try TLSContext(trustedCAFile: cert.certificate))
        #expect(ContinuousClock.now - started >= .milliseconds(700), "a third handshake ran while two were under way")
        client.send(SignalingMessage.join(room: "lab", token: mint(identity: "late", issuedAt: Int64(Date().timeIntervalSince1970)), rejoin: false).serialized())
        for connection in silent { #expect(connection.isClosedByServer()) }
        let metrics = try WebClient(port: try #require(server.metricsPort)).request("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").body
        #expect(metrics.contains(#"callend_signaling_refused_total{reason="tls_handshake_timeout"} 2"#), "\(metrics)")
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
