import Foundation
import Testing
import TestSupport
@testable import RTPTransport

/// Runs a handshake between two sessions by hand-carrying datagrams; returns each side's event.
func handshake(_ client: DTLSSession, _ server: DTLSSession, dropFirstFlight: Bool = false) -> (client: DTLSSession.Event?, server: DTLSSession.Event?) {
    var toServer = client.start().datagrams
    if dropFirstFlight {
        // The ClientHello is lost; it goes again once the session's own timer has run out.
        let delay = client.retransmissionDelay ?? .zero
        #expect(delay > .zero && delay <= .milliseconds(200))
        #expect(client.handleTimeout().datagrams.isEmpty, "nothing before the timer runs out")
        usleep(UInt32(delay.components.attoseconds / 1_000_000_000_000) + 5_000)
        toServer = client.handleTimeout().datagrams
    }
    var toClient: [[UInt8]] = []
    var events: (client: DTLSSession.Event?, server: DTLSSession.Event?) = (nil, nil)
    for _ in 0..<10 where !toServer.isEmpty || !toClient.isEmpty {
        for d in toServer {
            let out = server.handle(d)
            toClient += out.datagrams
            if let e = out.event { events.server = e }
        }
        toServer = []
        for d in toClient {
            let out = client.handle(d)
            toServer += out.datagrams
            if let e = out.event { events.client = e }
        }
        toClient = []
    }
    return events
}

@Suite struct DTLSTests {
    @Test func handshakeExportsMatchingSRTPKeys() throws {
        let (a, b) = (try DTLSCertificate(), try DTLSCertificate())
        #expect(a.fingerprint.algorithm == "sha-256" && a.fingerprint.bytes.count == 32 && a.fingerprint != b.fingerprint)
        let client = try DTLSSession(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSSession(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        let events = handshake(client, server)
        guard case .connected(let ck)? = events.client, case .connected(let sk)? = events.server else {
            Issue.record("no connection: \(String(describing: events))")
            return
        }
        #expect(ck.profile == .aeadAes128Gcm && sk.profile == ck.profile)
        #expect(ck.localKeyMaterial == sk.remoteKeyMaterial && ck.remoteKeyMaterial == sk.localKeyMaterial)
        #expect(ck.localKeyMaterial != ck.remoteKeyMaterial && ck.localKeyMaterial.count == 28)
        // The keys work: what one side protects the other unprotects.
        let out = try SRTPSession(profile: ck.profile, keyMaterial: ck.localKeyMaterial, direction: .outbound)
        let into = try SRTPSession(profile: sk.profile, keyMaterial: sk.remoteKeyMaterial, direction: .inbound)
        let packet = RTPPacket(payloadType: 96, sequenceNumber: 7, timestamp: 90, ssrc: 0x1234, payload: [1, 2, 3])
        #expect(try into.unprotectRTP(try out.protectRTP(packet.serialized())) == packet.serialized())
        // close_notify reaches the peer as `closed`.
        let bye = client.close().datagrams
        #expect(!bye.isEmpty)
        #expect(bye.compactMap { server.handle($0).event }.contains(.closed))
    }

    @Test func aForeignCertificateIsRefused() throws {
        let (a, b, mallory) = (try DTLSCertificate(), try DTLSCertificate(), try DTLSCertificate())
        // The server expected b's... no: the client expects the server to hold `b`, but it holds mallory's.
        let client = try DTLSSession(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSSession(role: .server, certificate: mallory, remoteFingerprint: a.fingerprint)
        let events = handshake(client, server)
        guard case .untrusted(let why)? = events.client else {
            Issue.record("the client accepted a certificate with another fingerprint: \(String(describing: events.client))")
            return
        }
        #expect(why.contains("does not match the fingerprint"), "\(why)")
    }

    @Test func theFingerprintMayArriveAfterTheHandshake() throws {
        let (a, b) = (try DTLSCertificate(), try DTLSCertificate())
        let client = try DTLSSession(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSSession(role: .server, certificate: b)
        let events = handshake(client, server)
        #expect(events.server == nil, "no verdict without a fingerprint")
        guard case .connected? = server.setRemoteFingerprint(a.fingerprint).event else {
            Issue.record("the late fingerprint did not complete the server")
            return
        }
        if case .connected = events.client {} else { Issue.record("client: \(String(describing: events.client))") }
        #expect(server.setRemoteFingerprint(a.fingerprint).event == nil, "one verdict")
    }

    @Test func aLostFlightIsSentAgain() throws {
        let (a, b) = (try DTLSCertificate(), try DTLSCertificate())
        let client = try DTLSSession(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSSession(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        let events = handshake(client, server, dropFirstFlight: true)
        if case .connected = events.client {} else { Issue.record("client: \(String(describing: events.client))") }
    }

    @Test func garbageIsNotAHandshake() throws {
        let server = try DTLSSession(role: .server, certificate: try DTLSCertificate())
        var generator = SeededGenerator(seed: 7)
        for length in [0, 1, 12, 13, 14, 100, 1500] {
            let junk = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = server.handle([22, 0xfe, 0xfd] + junk)
        }
        if case .connected? = server.handle([1, 2, 3]).event { Issue.record("garbage completed a handshake") }
    }

    @Test func recordsAreCutIntoDatagramsAtRecordBoundaries() {
        func record(_ n: Int) -> [UInt8] { [22, 0xfe, 0xfd] + [UInt8](repeating: 0, count: 8) + [UInt8(n >> 8), UInt8(n & 0xff)] + [UInt8](repeating: 7, count: n) }
        let run = record(500) + record(500) + record(300)
        let datagrams = DTLSSession.pack(records: run, limit: 1200)
        #expect(datagrams.map(\.count) == [1026, 313])
        #expect(datagrams.flatMap { $0 } == run)
        #expect(DTLSSession.pack(records: record(1500), limit: 1200).map(\.count) == [1513], "an oversized record goes alone")
        #expect(DTLSSession.pack(records: [22, 0xfe], limit: 1200) == [[22, 0xfe]], "a truncated tail is kept, not dropped")
    }

    @Test func fingerprintAttributesParse() {
        let f = DTLSFingerprint(attribute: "sha-256 " + (0..<32).map { _ in "AB" }.joined(separator: ":"))
        #expect(f?.bytes == [UInt8](repeating: 0xab, count: 32))
        #expect(f?.description.hasPrefix("sha-256 AB:AB") == true)
        for bad in ["", "sha-256", "md5 AB:CD", "sha-256 AB:CD", "sha-256 ZZ" + String(repeating: ":AB", count: 31), "sha-256 " + String(repeating: "AB:", count: 32)] {
            #expect(DTLSFingerprint(attribute: bad) == nil, "\(bad)")
        }
    }
}
