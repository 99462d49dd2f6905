import Dispatch
import Platform
import Synchronization

/// The one transport a call's media share (BUNDLE, RFC 8843; rtcp-mux, RFC 5761): an ICE agent
/// finds the path, DTLS on that path agrees the SRTP keys (RFC 5764), and SRTP protects audio,
/// video, RTX and RTCP alike. Datagrams on the path are told apart by their first byte (RFC 7983):
/// 20 ... 63 DTLS, 128 ... 191 RTP and RTCP (STUN never reaches here: libnice answers it).
/// Nothing is sent before the keys exist, and nothing that fails SRTP authentication is
/// delivered: a packet from anywhere but the peer that holds the DTLS keys is dropped.
public final class BundleTransport: PacketTransport, @unchecked Sendable {  // mutable state is in `state`; `agent` is set once in init
    public struct Configuration: Sendable {
        public var ice: ICEAgent.Configuration
        public var certificate: DTLSCertificate
        public init(ice: ICEAgent.Configuration, certificate: DTLSCertificate) {
            self.ice = ice
            self.certificate = certificate
        }
    }

    public enum Event: Sendable, Equatable {
        case localCandidate(String)
        case gatheringDone
        case state(ICEConnectionState)
        case selectedPair(ICECandidatePair)
        /// DTLS is done and SRTP keyed: media may flow.
        case secured(SRTPProfile)
        /// ICE found no path, consent was lost, or the DTLS handshake failed.
        case failed(String)
        /// The peer's DTLS certificate is not the one its description announced: not a network
        /// fault but someone else on the path; no key was agreed.
        case untrusted(String)
        /// The peer closed DTLS (close_notify).
        case closedByPeer
    }

    /// Counts for stats: what could not be sent and what was refused on arrival.
    public struct Counters: Sendable, Equatable {
        public var notSent = 0
        public var refused = 0
    }

    struct State {
        var dtls: DTLSSession?
        /// DTLS datagrams that came before the role and fingerprint were known (the answerer's
        /// ClientHello can beat the answer to the offerer).
        var early: [[UInt8]] = []
        var iceConnected = false
        var handshakeStarted = false
        var outbound: SRTPSession?
        var inbound: SRTPSession?
        var handler: (@Sendable (ReceivedPacket) -> Void)?
        var selectedPair: ICECandidatePair?
        var profile: SRTPProfile?
        var counters = Counters()
        var closed = false
        var finished = false
        /// Sees every protected datagram as it goes out (tests check keystream uniqueness with it).
        var sentObserver: (@Sendable ([UInt8]) -> Void)?
        /// The DTLS-exported keys, kept for tests that look for them where they must not be.
        var keys: DTLSKeys?
    }

    public let configuration: Configuration
    private let state = Mutex(State())
    private let onEvent: @Sendable (Event) -> Void
    private let timerWake = DispatchSemaphore(value: 0)
    private var agent: ICEAgent!

    public init(configuration: Configuration, onEvent: @escaping @Sendable (Event) -> Void) throws(ICEError) {
        self.configuration = configuration
        self.onEvent = onEvent
        final class Weak: @unchecked Sendable {  // set once, right after init
            weak var transport: BundleTransport?
        }
        let me = Weak()
        agent = try ICEAgent(configuration: configuration.ice, onEvent: { event in me.transport?.iceEvent(event) },
                             onData: { bytes in me.transport?.incoming(bytes) })
        me.transport = self
    }

    deinit { close() }

    /// This side's ICE credentials and certificate fingerprint, for its session description.
    public var localCredentials: (ufrag: String, password: String) { agent.localCredentials }
    public var fingerprint: DTLSFingerprint { configuration.certificate.fingerprint }
    public var selectedPair: ICECandidatePair? { state.withLock { $0.selectedPair } }
    public var profile: SRTPProfile? { state.withLock { $0.profile } }
    public var counters: Counters { state.withLock { $0.counters } }
    public var overhead: Int { state.withLock { $0.profile == .aeadAes128Gcm ? 16 : 10 } }

    /// Starts gathering candidates; each comes as `.localCandidate`.
    public func start() throws(ICEError) { try agent.startGathering() }

    /// The peer's transport from its description, and who opens DTLS.
    public func setRemote(_ remote: JSEPDescription.Transport, role: DTLSSession.Role) throws {
        try agent.setRemoteCredentials(ufrag: remote.ufrag, password: remote.password)
        let dtls = try DTLSSession(role: role, certificate: configuration.certificate, remoteFingerprint: remote.fingerprint)
        let (early, start) = state.withLock { s -> ([[UInt8]], Bool) in
            s.dtls = dtls
            defer { s.early = [] }
            return (s.early, s.iceConnected)
        }
        for datagram in early { apply(dtls.handle(datagram)) }
        if start { startHandshake() }
        for candidate in remote.candidates { try? agent.addRemoteCandidate(candidate) }
        if remote.endOfCandidates { agent.remoteGatheringDone() }
    }

    public func addRemoteCandidate(_ line: String) throws(ICEError) { try agent.addRemoteCandidate(line) }
    public func remoteGatheringDone() { agent.remoteGatheringDone() }

    // MARK: Sending

    @discardableResult
    public func sendRTP(_ packet: [UInt8], kind: MediaKind) -> Bool { send(packet) { try $0.protectRTP($1) } }

    @discardableResult
    public func sendRTCP(_ packet: [UInt8], kind: MediaKind) -> Bool { send(packet) { try $0.protectRTCP($1) } }

    private func send(_ packet: [UInt8], protect: (SRTPSession, [UInt8]) throws -> [UInt8]) -> Bool {
        let (session, observer) = state.withLock { ($0.outbound, $0.sentObserver) }
        guard let session, let protected = try? protect(session, packet), agent.send(protected) else {
            state.withLock { $0.counters.notSent += 1 }
            return false
        }
        observer?(protected)
        return true
    }

    func observeSent(_ observer: @escaping @Sendable ([UInt8]) -> Void) { state.withLock { $0.sentObserver = observer } }
    var negotiatedKeys: DTLSKeys? { state.withLock { $0.keys } }

    public func startDelivering(to handler: @escaping @Sendable (ReceivedPacket) -> Void) {
        state.withLock { $0.handler = handler }
    }

    /// close_notify to the peer, then the ICE agent goes (its TURN allocation released).
    public func close() {
        let dtls = state.withLock { s -> DTLSSession? in
            guard !s.closed else { return nil }
            s.closed = true
            s.handler = nil
            return s.dtls
        }
        if let dtls { for datagram in dtls.close().datagrams { agent.send(datagram) } }
        timerWake.signal()
        agent?.close()
    }

    // MARK: The agent's thread

    private func iceEvent(_ event: ICEAgent.Event) {
        switch event {
        case .localCandidate(let c): onEvent(.localCandidate(c))
        case .gatheringDone: onEvent(.gatheringDone)
        case .selectedPair(let pair):
            state.withLock { $0.selectedPair = pair }
            onEvent(.selectedPair(pair))
        case .state(let s):
            onEvent(.state(s))
            if s == .connected || s == .ready {
                let start = state.withLock { st -> Bool in
                    defer { st.iceConnected = true }
                    return !st.iceConnected && st.dtls != nil
                }
                if start { startHandshake() }
            } else if s == .failed {
                onEvent(.failed("ICE failed: no candidate pair works, or the peer stopped answering consent checks (RFC 7675)"))
            }
        }
    }

    private func incoming(_ datagram: [UInt8]) {
        guard let first = datagram.first else { return }
        switch first {
        case 20...63:
            let dtls = state.withLock { s -> DTLSSession? in
                if s.dtls == nil && s.early.count < 16 { s.early.append(datagram) }
                return s.dtls
            }
            if let dtls { apply(dtls.handle(datagram)) }
        case 128...191:
            let (session, handler) = state.withLock { ($0.inbound, $0.handler) }
            let rtcp = isRTCP(datagram)
            guard let session, let clear = try? (rtcp ? session.unprotectRTCP(datagram) : session.unprotectRTP(datagram)) else {
                state.withLock { $0.counters.refused += 1 }
                return
            }
            handler?(ReceivedPacket(bytes: clear, isRTCP: rtcp, kind: nil, age: .zero))
        default:
            state.withLock { $0.counters.refused += 1 }
        }
    }

    /// The DTLS client speaks first once ICE has a path; either side then runs the
    /// retransmission timer until the handshake ends.
    private func startHandshake() {
        guard let dtls = state.withLock({ s -> DTLSSession? in
            guard !s.handshakeStarted, let d = s.dtls else { return nil }
            s.handshakeStarted = true
            return d
        }) else { return }
        if dtls.role == .client { apply(dtls.start()) }
        startThread(named: "dtls-timer") { [weak self] in
            while let self, !self.state.withLock({ $0.finished || $0.closed }) {
                let delay = dtls.retransmissionDelay ?? .milliseconds(50)
                _ = self.timerWake.wait(timeout: .now() + .microseconds(Int(max(1_000, delay.components.attoseconds / 1_000_000_000_000 + delay.components.seconds * 1_000_000))))
                guard !self.state.withLock({ $0.finished || $0.closed }) else { return }
                if let remaining = dtls.retransmissionDelay, remaining <= .zero { self.apply(dtls.handleTimeout()) }
            }
        }
    }

    private func apply(_ output: DTLSSession.Output) {
        for datagram in output.datagrams { agent.send(datagram) }
        guard let event = output.event else { return }
        switch event {
        case .connected(let keys):
            do {
                let outbound = try SRTPSession(profile: keys.profile, keyMaterial: keys.localKeyMaterial, direction: .outbound)
                let inbound = try SRTPSession(profile: keys.profile, keyMaterial: keys.remoteKeyMaterial, direction: .inbound)
                state.withLock { s in
                    (s.outbound, s.inbound, s.profile, s.finished, s.keys) = (outbound, inbound, keys.profile, true, keys)
                }
                timerWake.signal()
                onEvent(.secured(keys.profile))
            } catch {
                state.withLock { $0.finished = true }
                onEvent(.failed("SRTP with the DTLS keys: \(error)"))
            }
        case .failed(let why):
            state.withLock { $0.finished = true }
            timerWake.signal()
            onEvent(.failed("DTLS: \(why)"))
        case .untrusted(let why):
            state.withLock { $0.finished = true }
            timerWake.signal()
            onEvent(.untrusted("DTLS: \(why)"))
        case .closed:
            onEvent(.closedByPeer)
        }
    }
}
