import MediaCore
import Dispatch
import Platform
import Synchronization
import ICEServers

/// The one transport a call's media share (BUNDLE, RFC 8843; rtcp-mux, RFC 5761): an ICE agent
/// finds the path, DTLS on that path agrees the SRTP keys (RFC 5764), and SRTP protects audio,
/// video, RTX and RTCP alike. Datagrams on the path are told apart by their first byte (RFC 7983):
/// 20 ... 63 DTLS, 128 ... 191 RTP and RTCP (STUN never reaches here: libnice answers it).
/// Nothing is sent before the keys exist, and nothing that fails SRTP authentication is
/// delivered: a packet from anywhere but the peer that holds the DTLS keys is dropped.
public final class BundleTransport: PacketTransport, @unchecked Sendable {  // mutable state, the ICE agents included, is in `state`
    public struct Configuration: Sendable {
        public var ice: ICEAgent.Configuration
        public var certificate: DTLSCertificate
        /// How long without a sign of the peer's consent before sending stops (RFC 7675: 30 s).
        public var consentExpiry: Duration
        public init(ice: ICEAgent.Configuration, certificate: DTLSCertificate, consentExpiry: Duration = PathConsent.defaultExpiry) {
            self.ice = ice
            self.certificate = certificate
            self.consentExpiry = consentExpiry
        }
    }

    /// Why the path was lost.
    public enum PathLoss: Sendable, Equatable {
        /// Nothing authenticated came from the peer for this long (at least `consentExpiry`).
        case consentExpired(silentFor: Duration)
        /// The ICE agent failed the selected pair: its keepalives went unanswered.
        case pairFailed
    }

    public enum Event: Sendable, Equatable {
        /// A local candidate, and the username fragment of the agent that gathered it (a restart
        /// gathers under new credentials).
        case localCandidate(String, ufrag: String)
        case gatheringDone(ufrag: String)
        case state(ICEConnectionState)
        case selectedPair(ICECandidatePair)
        /// DTLS is done and SRTP keyed: media may flow.
        case secured(SRTPProfile)
        /// ICE found no path, or the DTLS handshake failed, before media could flow.
        case failed(String)
        /// The peer's DTLS certificate is not the one its description announced: not a network
        /// fault but someone else on the path; no key was agreed.
        case untrusted(String)
        /// The peer closed DTLS (close_notify).
        case closedByPeer
        /// Media flowed, then consent expired (RFC 7675: nothing authenticated came from the peer
        /// for `consentExpiry`), or libnice failed the pair (no keepalive answered for 50 s):
        /// nothing is sent until the peer is heard again or a check finds a path. Rechecks run
        /// every second meanwhile. Which of the two, for the log.
        case pathLost(PathLoss)
        /// A path works again after `pathLost`: the peer's media arrived again, or a recheck or
        /// an ICE restart found a path.
        case pathRestored
        /// The peer's media authenticated while the path is lost and no pair works (an outage
        /// one way only): at most once per `heardInterval`, so that a controller hears of it as
        /// an event instead of watching a counter.
        case heardWhileLost
        /// An ICE restart's agent found a path and took over from the previous one.
        case restarted(ufrag: String)
    }

    /// Counts for stats: what could not be sent, what was refused on arrival, and what was
    /// dropped past `maxUndelivered` before anyone took the media.
    public struct Counters: Sendable, Equatable {
        public var notSent = 0
        public var refused = 0
        public var undeliveredDropped = 0
    }

    /// One ICE agent and what is known of it: the current one carries media; the next one, made by
    /// an ICE restart, takes over once it has a path (make before break).
    struct Leg {
        let agent: ICEAgent
        let generation: Int
        var remoteUfrag: String?
        var state: ICEConnectionState = .disconnected
        var selectedPair: ICECandidatePair?
        var isUp: Bool { state == .connected || state == .ready }
    }

    struct State {
        var current: Leg
        var next: Leg?
        var generations = 0
        var dtls: DTLSSession?
        var applicationHandler: (@Sendable ([UInt8]) -> Void)?
        /// DTLS datagrams that came before the role and fingerprint were known (the answerer's
        /// ClientHello can beat the answer to the offerer).
        var early: [[UInt8]] = []
        var iceConnected = false
        var handshakeStarted = false
        var outbound: SRTPSession?
        var inbound: SRTPSession?
        var handler: (@Sendable (ReceivedPacket) -> Void)?
        /// The peer's media that authenticated before `startDelivering`, with when it came.
        var undelivered: [(bytes: [UInt8], isRTCP: Bool, at: MediaTime)] = []
        var profile: SRTPProfile?
        var counters = Counters()
        var closed = false
        var finished = false
        /// Since when the path has been lost (consent gone after media flowed); nil while it works.
        var lostSince: MediaTime?
        /// When `heardWhileLost` last went.
        var heardWhileLostAt: MediaTime?
        var consent: PathConsent
        var rechecking = false
        /// Candidates (and ends of candidates, "") under credentials no agent knows yet: a
        /// restart's, trickled before its description was taken. Kept until it is (32 at most).
        var strays: [(ufrag: String, line: String)] = []
        /// Sees every protected datagram as it goes out (tests check keystream uniqueness with it).
        var sentObserver: (@Sendable ([UInt8]) -> Void)?
        /// The DTLS-exported keys, kept for tests that look for them where they must not be.
        var keys: DTLSKeys?
        /// Agents of earlier generations still closing (releasing TURN allocations).
        var closing = 0
    }

    /// Agents that may be closing at once: a restart beyond it is refused, so a peer that sends
    /// restart offers faster than agents close cannot pile up threads, sockets and allocations.
    public static let maxClosingAgents = 2
    /// What is kept of the peer's media between DTLS keying SRTP and `startDelivering`: the
    /// peer starts sending as soon as its side is keyed, and this side may still be making its
    /// encoder and decoder (H.264's take hundreds of milliseconds on a busy machine). 512 packets: over a second of video at
    /// 2.5 Mbit/s with its audio, at most 0.8 MB.
    public static let maxUndelivered = 512

    public let configuration: Configuration
    private let state: Mutex<State>
    private let onEvent: @Sendable (Event) -> Void
    private let timerWake = DispatchSemaphore(value: 0)
    private let recheckWake = DispatchSemaphore(value: 0)
    /// How often a lost path is checked again.
    public static let recheckInterval: Duration = .seconds(1)
    /// `heardWhileLost` goes at most this often while the peer's media arrives on a lost path.
    public static let heardInterval: Duration = .milliseconds(100)

    final class Weak: @unchecked Sendable {  // set once, right after init
        weak var transport: BundleTransport?
    }
    private let me: Weak

    public init(configuration: Configuration, onEvent: @escaping @Sendable (Event) -> Void) throws(ICEError) {
        self.configuration = configuration
        self.onEvent = onEvent
        let me = Weak()
        self.me = me
        let agent = try Self.makeAgent(configuration.ice, generation: 0, me: me)
        state = Mutex(State(current: Leg(agent: agent, generation: 0), consent: PathConsent(expiry: configuration.consentExpiry)))
        me.transport = self
    }

    private static func makeAgent(_ ice: ICEAgent.Configuration, generation: Int, me: Weak) throws(ICEError) -> ICEAgent {
        try ICEAgent(configuration: ice, onEvent: { event in me.transport?.iceEvent(event, generation: generation) },
                     onData: { bytes in me.transport?.incoming(bytes) })
    }

    deinit { close() }

    private var agent: ICEAgent { state.withLock { $0.current.agent } }

    /// This side's ICE credentials (of the agent carrying media) and certificate fingerprint.
    public var localCredentials: (ufrag: String, password: String) { agent.localCredentials }
    public var fingerprint: DTLSFingerprint { configuration.certificate.fingerprint }
    public var selectedPair: ICECandidatePair? { state.withLock { $0.current.selectedPair } }
    public var profile: SRTPProfile? { state.withLock { $0.profile } }
    public var counters: Counters { state.withLock { $0.counters } }
    public var overhead: Int { state.withLock { $0.profile == .aeadAes128Gcm ? 16 : 10 } }
    /// Since when the path has been lost, nil while it works.
    public var pathLostSince: MediaTime? { state.withLock { $0.lostSince } }
    /// SRTP and SRTCP packets that arrived and authenticated: proof that the peer's media reaches
    /// us, whatever the state of our consent to send.
    public var packetsAuthenticated: Int { authenticated.load(ordering: .relaxed) }
    private let authenticated = Atomic<Int>(0)

    /// Starts gathering candidates; each comes as `.localCandidate`.
    public func start() throws(ICEError) { try agent.startGathering() }

    /// The peer's transport from its description, and who opens DTLS.
    public func setRemote(_ remote: JSEPDescription.Transport, role: DTLSSession.Role) throws {
        let agent = self.agent
        try agent.setRemoteCredentials(ufrag: remote.ufrag, password: remote.password)
        state.withLock { $0.current.remoteUfrag = remote.ufrag }
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

    /// A trickled candidate of the peer. `ufrag` (the peer's, when the signaling says it) picks
    /// the agent it belongs to; a candidate of credentials neither agent knows is stale (from
    /// before a restart) and dropped. Without it, the newest agent that knows the peer takes it.
    public func addRemoteCandidate(_ line: String, ufrag: String? = nil) throws(ICEError) {
        guard let agent = agent(forRemote: ufrag, line: line) else { return }
        try agent.addRemoteCandidate(line)
    }

    public func remoteGatheringDone(ufrag: String? = nil) { agent(forRemote: ufrag, line: "")?.remoteGatheringDone() }

    /// The agent that knows the peer under `ufrag`; nil (the line kept for later) when none does.
    private func agent(forRemote ufrag: String?, line: String) -> ICEAgent? {
        state.withLock { s in
            let legs = [s.next, s.current].compactMap { $0 }
            guard let ufrag else { return (legs.first { $0.remoteUfrag != nil } ?? s.current).agent }
            if let leg = legs.first(where: { $0.remoteUfrag == ufrag || $0.remoteUfrag == nil && $0.generation == 0 }) { return leg.agent }
            if s.strays.count < 32 { s.strays.append((ufrag, line)) }
            return nil
        }
    }

    // MARK: ICE restart

    /// Starts an ICE restart (RFC 8445 §9): a new agent with new credentials gathers now, and
    /// takes over once it finds a path; media stays on the current path until then, and DTLS and
    /// SRTP stay as they are. A restart still under way is dropped for this one. Returns the new
    /// credentials, for the description that announces them.
    public func restartICE(controlling: Bool, servers: [ICEServer]? = nil) throws(ICEError) -> (ufrag: String, password: String) {
        var ice = configuration.ice
        ice.controlling = controlling
        // TURN credentials renewed since the call began (they live no longer than the token).
        if let servers { ice.servers = servers }
        let generation = try state.withLock { s throws(ICEError) in
            guard s.closing < Self.maxClosingAgents else {
                throw ICEError("an ICE restart waits for \(s.closing) earlier agents to close")
            }
            s.generations += 1
            return s.generations
        }
        let agent = try Self.makeAgent(ice, generation: generation, me: me)
        let replaced = state.withLock { s -> ICEAgent? in
            defer { s.next = Leg(agent: agent, generation: generation) }
            return s.next?.agent
        }
        replaced.map(closeInBackground)
        try agent.startGathering()
        return agent.localCredentials
    }

    /// The peer's side of the restart under way: its new credentials and candidates.
    public func setRestartRemote(_ remote: JSEPDescription.Transport) throws(ICEError) {
        guard let (agent, strays) = state.withLock({ s -> (ICEAgent, [String])? in
            guard s.next != nil else { return nil }
            s.next?.remoteUfrag = remote.ufrag
            let mine = s.strays.filter { $0.ufrag == remote.ufrag }.map(\.line)
            s.strays.removeAll { $0.ufrag == remote.ufrag }
            return s.next.map { ($0.agent, mine) }
        }) else { throw ICEError("no ICE restart under way for the peer's new credentials") }
        try agent.setRemoteCredentials(ufrag: remote.ufrag, password: remote.password)
        for candidate in remote.candidates + strays.filter({ !$0.isEmpty }) { try? agent.addRemoteCandidate(candidate) }
        if remote.endOfCandidates || strays.contains("") { agent.remoteGatheringDone() }
    }

    /// Whether a restart is under way, and whether the peer has answered it.
    public var restartUnderWay: (started: Bool, peerKnown: Bool) {
        state.withLock { ($0.next != nil, $0.next?.remoteUfrag != nil) }
    }

    /// Drops a restart under way (the peer's restart wins a glare).
    public func abandonRestart() {
        state.withLock { s -> ICEAgent? in defer { s.next = nil }; return s.next?.agent }.map(closeInBackground)
    }

    /// Closing waits for TURN allocations to be released (two seconds at most): not on an agent's
    /// thread. What the agent's thread and GLib context held goes back to the kernel with it, so
    /// that a call of months, which restarts ICE many times an hour on a lossy path, does not keep
    /// each round's memory in the allocator.
    private func closeInBackground(_ agent: ICEAgent) {
        state.withLock { $0.closing += 1 }
        startThread(named: "ice-close") { [me] in
            agent.close()
            me.transport?.state.withLock { $0.closing -= 1 }
            releaseFreeMemory()
        }
    }

    // MARK: Sending

    @discardableResult
    public func sendRTP(_ packet: [UInt8], kind: MediaKind) -> Bool { send(packet) { try $0.protectRTP($1) } }

    @discardableResult
    public func sendRTCP(_ packet: [UInt8], kind: MediaKind) -> Bool { send(packet) { try $0.protectRTCP($1) } }

    /// Nothing goes out once consent has expired (RFC 7675 §5.1), which the sending threads
    /// notice here: they send RTCP at least every second.
    private func send(_ packet: [UInt8], protect: (SRTPSession, [UInt8]) throws -> [UInt8]) -> Bool {
        let now = MediaTime.now
        let (session, observer, agent, silence) = state.withLock { s in
            var silence: Duration?
            if s.lostSince == nil, s.profile != nil, s.consent.expired(at: now) {
                s.lostSince = now
                silence = s.consent.lastSign.map { now - $0 }
            }
            return (s.lostSince == nil ? s.outbound : nil, s.sentObserver, s.current.agent, silence)
        }
        if let silence {
            onEvent(.pathLost(.consentExpired(silentFor: silence)))
            startRechecking()
        }
        guard let session, let protected = try? protect(session, packet), agent.send(protected) else {
            state.withLock { $0.counters.notSent += 1 }
            return false
        }
        observer?(protected)
        return true
    }

    func observeSent(_ observer: @escaping @Sendable ([UInt8]) -> Void) { state.withLock { $0.sentObserver = observer } }
    var negotiatedKeys: DTLSKeys? { state.withLock { $0.keys } }

    /// Media from now on goes to `handler`, first what came before (in order, with its age).
    public func startDelivering(to handler: @escaping @Sendable (ReceivedPacket) -> Void) {
        // What arrives while the kept packets are handed over is kept behind them: the handler is
        // set only once none is left, so nothing overtakes them.
        while true {
            let kept = state.withLock { s -> [(bytes: [UInt8], isRTCP: Bool, at: MediaTime)] in
                if s.undelivered.isEmpty { s.handler = handler }
                defer { s.undelivered = [] }
                return s.undelivered
            }
            if kept.isEmpty { return }
            let now = MediaTime.now
            for packet in kept { handler(ReceivedPacket(bytes: packet.bytes, isRTCP: packet.isRTCP, kind: nil, age: now - packet.at)) }
        }
    }

    /// close_notify to the peer, then the ICE agent goes (its TURN allocation released).
    public func close() {
        guard let (dtls, agents) = state.withLock({ s -> (DTLSSession?, [ICEAgent])? in
            guard !s.closed else { return nil }
            s.closed = true
            s.handler = nil
            s.undelivered = []
            defer { s.next = nil }
            return (s.dtls, [s.current.agent] + (s.next.map { [$0.agent] } ?? []))
        }) else { return }
        if let dtls { for datagram in dtls.close().datagrams { agents[0].send(datagram) } }
        timerWake.signal()
        recheckWake.signal()
        for agent in agents { agent.close() }
    }

    // MARK: The agent's thread

    private func iceEvent(_ event: ICEAgent.Event, generation: Int) {
        enum Which { case current, next }
        guard let (which, ufrag) = state.withLock({ s -> (Which, String)? in
            if s.current.generation == generation { return (.current, s.current.agent.localCredentials.ufrag) }
            if let next = s.next, next.generation == generation { return (.next, next.agent.localCredentials.ufrag) }
            return nil
        }) else { return }
        switch event {
        case .localCandidate(let c): onEvent(.localCandidate(c, ufrag: ufrag))
        case .gatheringDone: onEvent(.gatheringDone(ufrag: ufrag))
        case .selectedPair(let pair):
            state.withLock { s in
                if which == .current { s.current.selectedPair = pair } else { s.next?.selectedPair = pair }
            }
            if which == .current { onEvent(.selectedPair(pair)) }
        case .state(let new):
            if which == .next {
                // A restart's agent takes over once it has a path; until then its failures are its own.
                let up = state.withLock { s -> Bool in
                    s.next?.state = new
                    return s.next?.isUp == true
                }
                if up { promoteNext() }
                return
            }
            let (start, restored, lost) = state.withLock { s -> (Bool, Bool, Bool) in
                s.current.state = new
                if s.current.isUp {
                    // A check was answered: consent (RFC 7675 §5.1).
                    s.consent.signOfLife(at: .now)
                    defer { s.iceConnected = true; s.lostSince = nil }
                    return (!s.iceConnected && s.dtls != nil, s.lostSince != nil, false)
                }
                // Consent lost after media began: not the end, the path may come back.
                guard new == .failed, s.profile != nil, s.lostSince == nil else { return (false, false, false) }
                s.lostSince = .now
                return (false, false, true)
            }
            onEvent(.state(new))
            if start { startHandshake() }
            if restored { onEvent(.pathRestored) }
            if lost {
                onEvent(.pathLost(.pairFailed))
                startRechecking()
            } else if new == .failed, state.withLock({ $0.profile == nil && $0.next == nil }) {
                // (With a restart under way, its agent may still find the first path.)
                onEvent(.failed("ICE failed: no candidate pair works"))
            }
        }
    }

    /// The restart's agent has a path: it carries media from now on, and the previous one goes.
    private func promoteNext() {
        guard let (old, leg, wasLost, firstPath) = state.withLock({ s -> (ICEAgent, Leg, Bool, Bool)? in
            guard let next = s.next, !s.closed else { return nil }
            let old = s.current.agent
            s.current = next
            s.next = nil
            s.consent.signOfLife(at: .now)
            // A restart before any path (a WHEP player that restarts with the TURN servers of
            // the answer) brings the first one: DTLS starts on it.
            let firstPath = !s.iceConnected && s.dtls != nil
            s.iceConnected = true
            defer { s.lostSince = nil }
            return (old, next, s.lostSince != nil, firstPath)
        }) else { return }
        closeInBackground(old)
        if firstPath { startHandshake() }
        onEvent(.restarted(ufrag: leg.agent.localCredentials.ufrag))
        if let pair = leg.selectedPair { onEvent(.selectedPair(pair)) }
        if wasLost { onEvent(.pathRestored) }
    }

    /// While the path is lost, every pair is checked again each second with the same
    /// credentials (the peer does the same), so media resumes soon after the path returns; the
    /// first recheck goes at once.
    private func startRechecking() {
        guard state.withLock({ s in defer { s.rechecking = true }; return !s.rechecking }) else { return }
        startThread(named: "ice-recheck") { [weak self] in
            while true {
                guard let self else { return }
                let agent = self.state.withLock { s -> ICEAgent? in
                    guard !s.closed, s.lostSince != nil, !s.current.isUp else {
                        s.rechecking = false
                        return nil
                    }
                    return s.current.agent
                }
                guard let agent else { return }
                agent.recheck()
                self.recheckWake.wait(for: Self.recheckInterval)
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
            authenticated.add(1, ordering: .relaxed)
            // Only the peer holds the keys: its consent, and the path works again if it was lost
            // (once the agent can send again: a recheck that reset its pairs has to find one).
            let now = MediaTime.now
            let (restored, heard) = state.withLock { s -> (Bool, Bool) in
                s.consent.signOfLife(at: now)
                guard let since = s.lostSince, !s.closed else { return (false, false) }
                guard s.current.isUp else {
                    // The first packet of this loss, then one every heardInterval.
                    if let last = s.heardWhileLostAt, last >= since, now - last < Self.heardInterval { return (false, false) }
                    s.heardWhileLostAt = now
                    return (false, true)
                }
                s.lostSince = nil
                return (true, false)
            }
            if restored { onEvent(.pathRestored) }
            if heard { onEvent(.heardWhileLost) }
            let deliver = handler ?? state.withLock { s -> (@Sendable (ReceivedPacket) -> Void)? in
                if let set = s.handler { return set }
                guard !s.closed else { return nil }
                if s.undelivered.count < Self.maxUndelivered { s.undelivered.append((clear, rtcp, now)) } else { s.counters.undeliveredDropped += 1 }
                return nil
            }
            deliver?(ReceivedPacket(bytes: clear, isRTCP: rtcp, kind: nil, age: .zero))
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
                self.timerWake.wait(for: max(.milliseconds(1), delay))
                guard !self.state.withLock({ $0.finished || $0.closed }) else { return }
                if let remaining = dtls.retransmissionDelay, remaining <= .zero { self.apply(dtls.handleTimeout()) }
            }
        }
    }

    /// Where the peer's DTLS application data goes (the data channels' SCTP packets).
    public func onApplicationData(_ handler: @escaping @Sendable ([UInt8]) -> Void) {
        state.withLock { $0.applicationHandler = handler }
    }

    /// Application data (an SCTP packet) to the peer over DTLS; false when DTLS is not up or
    /// consent has expired.
    @discardableResult
    public func sendApplicationData(_ data: [UInt8]) -> Bool {
        guard let (dtls, agent) = state.withLock({ s -> (DTLSSession, ICEAgent)? in
            guard s.lostSince == nil, !s.closed, let d = s.dtls else { return nil }
            return (d, s.current.agent)
        }) else { return false }
        let datagrams = dtls.write(data)
        for datagram in datagrams { agent.send(datagram) }
        return !datagrams.isEmpty
    }

    private func apply(_ output: DTLSSession.Output) {
        for datagram in output.datagrams { agent.send(datagram) }
        defer {
            if !output.applicationData.isEmpty, let handler = state.withLock({ $0.applicationHandler }) {
                for data in output.applicationData { handler(data) }
            }
        }
        guard let event = output.event else { return }
        switch event {
        case .connected(let keys):
            do {
                let outbound = try SRTPSession(profile: keys.profile, keyMaterial: keys.localKeyMaterial, direction: .outbound)
                let inbound = try SRTPSession(profile: keys.profile, keyMaterial: keys.remoteKeyMaterial, direction: .inbound)
                state.withLock { s in
                    (s.outbound, s.inbound, s.profile, s.finished, s.keys) = (outbound, inbound, keys.profile, true, keys)
                    // The peer finished the handshake with its certificate: consent, from now on
                    // kept by its SRTP (the handshake may have taken long on a lossy path).
                    s.consent.signOfLife(at: .now)
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
