import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint
@testable import RTPTransport

/// A TCP relay on loopback that keeps every byte it carries in both directions: a capture of
/// the signaling, as someone on the path (or the service itself) sees it.
final class RecordingProxy: @unchecked Sendable {  // the listener is set in init; `captured` is behind a lock
    let port: Int
    private let listener: Int32
    let captured = Mutex<[UInt8]>([])
    private let stopping = Atomic<Bool>(false)

    /// `rewrite` edits each line a client sends before the service sees it (a man in the middle).
    init(to upstream: Int, rewrite: (@Sendable (String) -> String)? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        listener = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(fd, 8)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            while !stopping.load(ordering: .relaxed) {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { continue }
                let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var target = sockaddr_in()
                target.sin_family = sa_family_t(AF_INET)
                target.sin_addr.s_addr = inet_addr("127.0.0.1")
                target.sin_port = UInt16(upstream).bigEndian
                _ = withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
                for (from, to, edit) in [(client, server, rewrite), (server, client, nil)] {
                    Thread { [self] in
                        var buffer = [UInt8](repeating: 0, count: 65536)
                        var pending: [UInt8] = []
                        while true {
                            let n = read(from, &buffer, buffer.count)
                            if n <= 0 { break }
                            captured.withLock { $0 += buffer[0..<n] }
                            guard let edit else {
                                _ = write(to, buffer, n)
                                continue
                            }
                            pending += buffer[0..<n]
                            while let end = pending.firstIndex(of: 0x0a) {
                                let line = Array(edit(String(decoding: pending[...end], as: UTF8.self)).utf8)
                                pending.removeSubrange(...end)
                                _ = write(to, line, line.count)
                            }
                        }
                        shutdown(to, Int32(SHUT_WR))
                    }.start()
                }
            }
        }.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

@Suite(.serialized) struct SignalingCaptureTests {
    /// The signaling of a call carries SDP with ICE credentials and certificate fingerprints,
    /// and no SRTP key in any form: the keys come from DTLS on the media path.
    @Test func noSRTPKeyTravelsInSignaling() throws {
        let service = try TestService()
        let proxy = try RecordingProxy(to: service.server.port)
        defer { proxy.stop() }
        let renderer = RecordingRenderer()
        func join(_ who: String, renderers: [any VideoRenderer]) throws -> Room {
            var media = try Call.Media.synthetic(width: 160, height: 120)
            media.renderers = renderers
            let waiter = JoinWaiter(forwardingTo: nil)
            let room = try Room.connect(options: try service.options(who), server: ("127.0.0.1", proxy.port), media: media,
                                        duration: .seconds(20), delegate: waiter)
            #expect(waiter.joined.wait(timeout: 30))
            return room
        }
        let alice = try join("alice", renderers: [])
        let bob = try join("bob", renderers: [renderer])
        defer { alice.disconnect(); bob.disconnect() }
        #expect(eventually(20) { renderer.frames > 5 }, "media flows")
        let keys = try #require(bob.call.current.withLock { $0.media }?.transport.negotiatedKeys)
        let capture = String(decoding: proxy.captured.withLock { $0 }, as: UTF8.self)
        #expect(capture.contains("a=fingerprint:sha-256 ") && capture.contains("a=ice-ufrag:") && capture.contains(#""candidate""#))
        #expect(!capture.contains("a=crypto") && !capture.contains("inline:"))
        for key in [keys.localKeyMaterial, keys.remoteKeyMaterial] {
            let encodings = [Data(key).base64EncodedString(), key.map { String(format: "%02x", $0) }.joined(), key.map { String(format: "%02X", $0) }.joined()]
            for text in encodings { #expect(!capture.contains(text), "a key appears in the capture") }
            #expect(proxy.captured.withLock { bytes in !bytes.indices.contains { i in i + key.count <= bytes.count && Array(bytes[i..<i + key.count]) == key } })
        }
    }

    /// Someone on the signaling path swaps the offer's fingerprint for their own: the answerer
    /// refuses the certificate it then meets, so nothing reaches whoever is on the path, and
    /// that session ends with the reason; the endpoint itself stays (ending it would let any
    /// participant who lies about its certificate stop it) and the peer is told why.
    @Test func aForgedFingerprintEndsTheSessionNotTheEndpoint() throws {
        let service = try TestService()
        let proxy = try RecordingProxy(to: service.server.port) { line in
            guard line.contains(#""type":"offer""#), let range = line.range(of: "a=fingerprint:sha-256 ") else { return line }
            var forged = line
            let first = forged.index(range.upperBound, offsetBy: 0)
            let byte = forged[first...].prefix(2)
            forged.replaceSubrange(first..<forged.index(first, offsetBy: 2), with: byte == "00" ? "01" : "00")
            return forged
        }
        defer { proxy.stop() }
        let aliceEvents = EventRecorder(), bobEvents = EventRecorder()
        let renderer = RecordingRenderer()
        var waiters: [JoinWaiter] = []  // a room holds its delegate weakly
        defer { withExtendedLifetime(waiters) {} }
        func join(_ who: String, _ events: EventRecorder, renderers: [any VideoRenderer] = []) throws -> Room {
            let waiter = JoinWaiter(forwardingTo: events)
            waiters.append(waiter)
            var media = try Call.Media.synthetic(width: 160, height: 120)
            media.renderers = renderers
            let room = try Room.connect(options: try service.options(who), server: ("127.0.0.1", proxy.port),
                                        media: media, duration: .seconds(600), delegate: waiter)
            #expect(waiter.joined.wait(timeout: 30))
            return room
        }
        let alice = try join("alice", aliceEvents, renderers: [renderer]), bob = try join("bob", bobEvents)
        defer { alice.disconnect(); bob.disconnect() }
        // Bob offered; Alice saw a forged fingerprint, refused Bob's real certificate, and said so.
        #expect(eventually(30) { aliceEvents.contains { if case .participantLeft("bob", let why) = $0 { return why.contains("does not match the fingerprint") }; return false } },
                "alice ends the session with the reason")
        #expect(eventually(30) { bobEvents.contains { if case .participantLeft("alice", let why) = $0 { return why.contains("certificate") }; return false } },
                "bob hears why")
        #expect(renderer.frames == 0, "no picture went through a session whose certificate was refused")
        // Alice is still in the room, not ended by the lie, and leaves when told to (not at the end
        // of its 10 minutes: the refused round's watcher once took the wake-up of the stop).
        alice.disconnect()
        let left = eventually(30) { aliceEvents.contains { if case .disconnected = $0 { return true }; return false } }
        #expect(left, "alice leaves when told to")
        guard left else { return }  // its wait would last the rest of its 10 minutes
        let summary = try alice.wait()
        #expect(summary.endReason == "stopped", "\(summary.endReason)")
    }
}
