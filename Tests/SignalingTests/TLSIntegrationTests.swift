import Foundation
import Testing
import TestSupport
@testable import Signaling

@Suite(.serialized) struct TLSIntegrationTests {
    @Test func callOverTLSWithATrustedCertificate() async throws {
        let cert = try TestCertificate()
        let server = try startServer(tls: TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        defer { server.stop() }
        let trust = try TLSContext(trustedCAFile: cert.certificate)
        let (a, logA) = makeClient(port: server.port, identity: "a", tls: trust, host: "localhost")
        let (b, logB) = makeClient(port: server.port, identity: "b", tls: trust, host: "127.0.0.1")
        defer { a.stop(); b.stop() }
        let joinedA = await logA.wait(isJoined), joinedB = await logB.wait(isJoined)
        #expect(joinedA != nil && joinedB != nil, "a: \(logA.all) b: \(logB.all)")
        let big = String(repeating: "x", count: 40_000)  // several TLS records
        a.send(RelayMessage(kind: .offer, id: "tls-1", to: "b", payload: .object(["sdp": .string(big)])))
        let got = await logB.wait { if case .message(let m) = $0 { return m.id == "tls-1" }; return false }
        if case .message(let m)? = got { #expect(m.payload["sdp"]?.stringValue == big) } else { Issue.record("offer not received over TLS") }
    }

    @Test func untrustedCertificateIsRefusedForGood() async throws {
        let cert = try TestCertificate(), other = try TestCertificate()
        let server = try startServer(tls: TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        defer { server.stop() }
        let (_, log) = makeClient(port: server.port, identity: "a", tls: try TLSContext(trustedCAFile: other.certificate), host: "localhost")
        let closed = await log.wait { if case .closed = $0 { return true }; return false }
        guard case .closed(let reason)? = closed else { Issue.record("no close: \(log.all)"); return }
        #expect(reason.contains("certificate"), "\(reason)")
    }

    @Test func wrongHostNameIsRefused() async throws {
        let cert = try TestCertificate(commonName: "signal.example")
        let server = try startServer(tls: TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        defer { server.stop() }
        // The certificate is trusted but names signal.example and 127.0.0.1, not localhost.
        let (_, log) = makeClient(port: server.port, identity: "a", tls: try TLSContext(trustedCAFile: cert.certificate), host: "localhost")
        let closed = await log.wait { if case .closed = $0 { return true }; return false }
        guard case .closed(let reason)? = closed else { Issue.record("no close: \(log.all)"); return }
        #expect(reason.contains("certificate"), "\(reason)")
    }

    @Test func plainClientGetsNothingFromATLSServer() async throws {
        let cert = try TestCertificate()
        let server = try startServer(tls: TLSContext(certificateFile: cert.certificate, privateKeyFile: cert.key))
        defer { server.stop() }
        let raw = try RawConnection(port: server.port)
        raw.send(SignalingMessage.join(room: "lab", token: mint(), rejoin: false).serialized())
        #expect(raw.receive() == nil)
        #expect(throws: TLSError.self) { try TLSContext(certificateFile: cert.key, privateKeyFile: cert.key) }
    }
}
