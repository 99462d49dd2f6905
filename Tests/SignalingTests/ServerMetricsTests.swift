import Foundation
@testable import SignalingService
import Testing
import TestSupport
@testable import Signaling

@Suite(.serialized) struct ServerMetricsTests {
    func scrape(_ port: Int) throws -> String {
        let response = try WebClient(port: port).request("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(response.status == 200 && response.head.contains("text/plain; version=0.0.4"))
        return response.body
    }

    func value(_ text: String, _ sample: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(sample + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test func metricsCountJoinsRefusalsAndRelays() async throws {
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        defer { server.stop() }
        let port = try #require(server.metricsPort)
        let (a, logA) = makeClient(port: server.port, identity: "a")
        let (b, logB) = makeClient(port: server.port, identity: "b")
        defer { a.stop(); b.stop() }
        let joinedA = await logA.wait(isJoined), joinedB = await logB.wait(isJoined)
        #expect(joinedA != nil && joinedB != nil)
        let (c, logC) = makeClient(port: server.port, identity: "c", fastRetry: false)
        defer { c.stop() }
        #expect(await logC.wait { if case .closed = $0 { return true }; return false } != nil, "a third in a room of two is refused")
        a.send(RelayMessage(kind: .offer, id: "m1", to: "b"))
        #expect(await logB.wait { if case .message = $0 { return true }; return false } != nil)

        let text = try scrape(port)
        #expect(value(text, "callend_signaling_joins_total") == 2)
        #expect(value(text, #"callend_signaling_errors_total{code="room_full"}"#) == 1)
        #expect(value(text, "callend_signaling_relayed_total") == 1)
        #expect(value(text, "callend_signaling_relay_seconds_count") == 1)
        #expect(value(text, "callend_signaling_rooms") == 1)
        #expect((value(text, "callend_signaling_connections") ?? 0) >= 2)
        #expect(try WebClient(port: port).request("GET / HTTP/1.1\r\nHost: t\r\n\r\n").status == 404)

        // Prometheus's own checker (Debian's prometheus package), where it is installed.
        if let (status, said) = try promtoolCheck(text) {
            #expect(status == 0 && said.isEmpty, "promtool: \(said)")
        }
    }

    /// A service on TLS says when its certificate ends, as openssl reads it, for the alert that
    /// warns before endpoints start refusing it; a plain service has no such metric.
    @Test func theCertificatesEndIsAMetric() throws {
        let cert = try TestCertificate()
        defer { try? FileManager.default.removeItem(atPath: cert.directory) }
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret, tls: try TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        defer { server.stop() }
        let text = try scrape(try #require(server.metricsPort))
        let served = try #require(value(text, "callend_signaling_certificate_expiry_timestamp_seconds"), "\(text)")
        // openssl's own reading of the certificate's notAfter, in seconds since 1970.
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["x509", "-in", cert.certificate, "-noout", "-dateopt", "iso_8601", "-enddate"]
        let out = Pipe()
        openssl.standardOutput = out
        try openssl.run()
        let said = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        openssl.waitUntilExit()
        let text8601 = try #require(said.split(separator: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines), "openssl said \(said)")
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss'Z'"
        let end = try #require(formatter.date(from: text8601), "openssl said \(said)")
        #expect(served == end.timeIntervalSince1970, "served \(served), openssl \(said)")

        var plain = SignalingServerConfiguration(port: 0, secret: testSecret)
        plain.metrics = ("127.0.0.1", 0)
        plain.insecurePlaintext = true
        let plainServer = try SignalingServer(configuration: plain)
        plainServer.start()
        defer { plainServer.stop() }
        #expect(!(try scrape(try #require(plainServer.metricsPort))).contains("certificate_expiry"))
    }
}
