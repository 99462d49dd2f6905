import Synchronization

/// One UDP socket per media kind, RTCP multiplexed on each (RFC 5761), for the sessions SDP files
/// describe: `callend send` sends to fixed ports, `callend receive` sends its RTCP back to where
/// each stream's packets come from. With SDES-SRTP keys (RFC 4568 a=crypto) it protects and
/// unprotects; streams keyed alike share one libsrtp2 session per direction, so every SSRC has
/// one SRTCP index sequence under a key and no keystream is used twice (RFC 3711 §9.1): two
/// sessions under one key and one SSRC both started their SRTCP index at 0.
public final class UDPPairTransport: PacketTransport, @unchecked Sendable {  // sockets and sessions are thread-safe; learned addresses are behind `learned`
    /// SRTP keys of one kind: what we send is protected with `send`, what we receive unprotected with `receive`.
    public struct Keys: Sendable {
        public var profile: SRTPProfile
        public var send: [UInt8]
        public var receive: [UInt8]
        public init(profile: SRTPProfile, send: [UInt8], receive: [UInt8]) {
            self.profile = profile
            self.send = send
            self.receive = receive
        }
    }

    private let sockets: [MediaKind: UDPSocket]
    private let fixed: [MediaKind: UDPAddress]
    private let learned = Mutex<[MediaKind: UDPAddress]>([:])
    private let outbound: [MediaKind: SRTPSession]
    private let inbound: [MediaKind: SRTPSession]
    public let overhead: Int

    /// `destinations`: where each kind goes; a kind without one answers to whoever sent it packets.
    public init(sockets: [MediaKind: UDPSocket], destinations: [MediaKind: UDPAddress] = [:], keys: [MediaKind: Keys] = [:]) throws(SRTPError) {
        self.sockets = sockets
        fixed = destinations
        var outbound: [MediaKind: SRTPSession] = [:], inbound: [MediaKind: SRTPSession] = [:]
        for (kind, k) in keys {
            if let shared = keys.first(where: { $0.key != kind && $0.value.send == k.send && $0.value.profile == k.profile && outbound[$0.key] != nil }) {
                outbound[kind] = outbound[shared.key]
            } else {
                outbound[kind] = try SRTPSession(profile: k.profile, keyMaterial: k.send, direction: .outbound)
            }
            if let shared = keys.first(where: { $0.key != kind && $0.value.receive == k.receive && $0.value.profile == k.profile && inbound[$0.key] != nil }) {
                inbound[kind] = inbound[shared.key]
            } else {
                inbound[kind] = try SRTPSession(profile: k.profile, keyMaterial: k.receive, direction: .inbound)
            }
        }
        self.outbound = outbound
        self.inbound = inbound
        overhead = keys.values.map { $0.profile == .aeadAes128Gcm ? 16 : 10 }.max() ?? 0
    }

    /// The one session that protects `kind` (tests check that kinds keyed alike share one).
    func outboundSession(_ kind: MediaKind) -> SRTPSession? { outbound[kind] }

    private func destination(_ kind: MediaKind) -> UDPAddress? { fixed[kind] ?? learned.withLock { $0[kind] } }

    @discardableResult
    public func sendRTP(_ packet: [UInt8], kind: MediaKind) -> Bool {
        send(packet, kind: kind) { try $0.protectRTP($1) }
    }

    @discardableResult
    public func sendRTCP(_ packet: [UInt8], kind: MediaKind) -> Bool {
        send(packet, kind: kind) { try $0.protectRTCP($1) }
    }

    private func send(_ packet: [UInt8], kind: MediaKind, protect: (SRTPSession, [UInt8]) throws -> [UInt8]) -> Bool {
        guard let socket = sockets[kind], let to = destination(kind) else { return false }
        var bytes = packet
        if let session = outbound[kind] {
            guard let protected = try? protect(session, packet) else { return false }
            bytes = protected
        }
        return (try? socket.send(bytes, to: to)) != nil
    }

    public func startDelivering(to handler: @escaping @Sendable (ReceivedPacket) -> Void) {
        for (kind, socket) in sockets {
            let session = inbound[kind]
            socket.startReceiving(name: "\(kind.rawValue)-receive") { [self] datagram, from, age in
                let rtcp = isRTCP(datagram)
                var bytes = datagram
                if let session {
                    guard let clear = try? (rtcp ? session.unprotectRTCP(datagram) : session.unprotectRTP(datagram)) else { return }
                    bytes = clear
                }
                if fixed[kind] == nil { learned.withLock { $0[kind] = from } }
                handler(ReceivedPacket(bytes: bytes, isRTCP: rtcp, kind: kind, age: age))
            }
        }
    }

    public func close() {
        for socket in sockets.values { socket.close() }
    }
}
