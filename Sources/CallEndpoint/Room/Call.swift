import Dispatch
import EndpointSignaling
import FoundationEssentials
import Glibc
import MediaCore
import Platform
import RTPTransport
import Signaling
import Synchronization
import ICEServers

/// What happened in a call, for the summary line and the demo.
public struct CallSummary: Sendable {
    public var participant = ""
    public var peer: String?
    /// From starting to join until the first decoded video frame.
    public var setupTime: Duration?
    /// Media sessions held: more than one when the peer left and came back.
    public var mediaRounds = 0
    public var sent: SenderStatistics?
    public var received: ReceiverSummary?
    public var endReason = ""
}

/// One endpoint of a two-party call: joins the room through the signaling service, makes or
/// answers the offer (the participant who joins second offers), runs `CallMedia` until the
/// duration passes or the peer leaves, then says `bye` and leaves. Runs on the calling thread.
public final class Call: @unchecked Sendable {  // the event queue is guarded by `events`, the callbacks by their locks (LockedCallback), `current` and the ICE servers by mutexes; everything else is used on the run thread
    /// What the call publishes and where the peer's media goes. The call closes all of it when it ends.
    public struct Media: Sendable {
        public var videoTrack: LocalVideoTrack?
        public var audioTrack: LocalAudioTrack?
        public var renderers: [any VideoRenderer]
        public var audioPlayout: (any AudioDevice)?
        /// Reads the capture stamps of the peer's test pattern and tone (benches, tests): the
        /// glass-to-glass latency in the statistics (see `MediaReceiverConfiguration`).
        public var measuresLatency = false
        /// Records both directions as WebM segments (`join --record-dir`).
        public var recording: CallRecording?
        /// Data channels (`join --data-socket`): offered and accepted when set.
        public var dataTrack: DataTrack?
        /// The video codecs offered and accepted, in order of preference (`--video-codec`); a call
        /// with a recording offers VP8 alone (WebM holds VP8 here).
        public var videoCodecs: [VideoCodec] = [.vp8]
        /// The kernel's H.264 encoder to send H.264 with (a memory-to-memory device such as the
        /// Raspberry Pi 4's /dev/video11, `--h264-encoder`); nil: OpenH264.
        public var h264EncoderDevice: String?

        public init(videoTrack: LocalVideoTrack?, audioTrack: LocalAudioTrack?, renderers: [any VideoRenderer] = [], audioPlayout: (any AudioDevice)? = nil) {
            self.videoTrack = videoTrack
            self.audioTrack = audioTrack
            self.renderers = renderers
            self.audioPlayout = audioPlayout
        }

        /// The test pattern at 640x480@30 and the marked tone; the peer's media is decoded and dropped.
        public static func synthetic(width: Int = 640, height: Int = 480, frameRate: Int = 30) throws -> Media {
            Media(videoTrack: LocalVideoTrack(source: try CameraSource(.pattern(width: width, height: height, frameRate: frameRate))),
                  audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .tone)))
        }

        func close() {
            videoTrack?.source.stop()
            audioTrack?.device.stopCapture()
            audioPlayout?.stopPlayout()
            for renderer in renderers { renderer.finish() }
            recording?.finish()
        }
    }

    public let options: ConnectOptions
    public let server: (host: String, port: Int)
    public let media: Media
    public let duration: Duration?

    /// What the call thread works through: signaling from the client's thread, and the
    /// transport's events (candidates, ICE and DTLS) from the ICE thread, tagged with the round
    /// they belong to so a closed round's late events are dropped.
    enum Event: Sendable {
        case signaling(SignalingEvent)
        case transport(round: Int, BundleTransport.Event)
        /// This side's camera was lost or came back (`CameraSource.deviceEvents` says which).
        case cameraChanged
    }

    /// Bounded: a months-long call that reconnects its signaling now and then, or a peer that
    /// floods, cannot grow it without end. Events that only say the latest state (joined, the
    /// service's ICE servers, a reconnect under way) replace their older copies; past `capacity`
    /// the oldest event goes, and `dropped` counts it.
    final class EventQueue: Sendable {
        static let defaultCapacity = 1024
        let capacity: Int
        private let items = Mutex<(events: [Event], dropped: Int)>(([], 0))
        /// Signalled on every append: a consumer waits on it instead of polling.
        private let arrived = DispatchSemaphore(value: 0)

        init(capacity: Int = EventQueue.defaultCapacity) { self.capacity = capacity }

        /// Waits until an event is appended or `timeout` passes (an event appended since the
        /// last wait returns at once).
        func wait(timeout: Duration) { arrived.wait(for: timeout) }
        /// Ends a wait without an event (`stop()`): the waiter looks at what changed.
        func wake() { arrived.signal() }

        var count: Int { items.withLock { $0.events.count } }
        var dropped: Int { items.withLock { $0.dropped } }

        func append(_ event: Event) {
            items.withLock { q in
                if let kind = Self.latestOnly(event) { q.events.removeAll { Self.latestOnly($0) == kind } }
                q.events.append(event)
                if q.events.count > capacity {
                    q.events.removeFirst(q.events.count - capacity)
                    q.dropped += 1
                }
            }
            arrived.signal()
        }
        func drain() -> [Event] { items.withLock { q in defer { q.events.removeAll() }; return q.events } }
        func contains(where predicate: (Event) -> Bool) -> Bool { items.withLock { $0.events.contains(where: predicate) } }
        /// Puts events back in front of the queue, in order (taken, but for someone else).
        func prepend(_ events: [Event]) { items.withLock { $0.events.insert(contentsOf: events, at: 0) } }
        /// Removes the matching events and returns them, in order.
        func take(where predicate: (Event) -> Bool) -> [Event] {
            items.withLock { q in
                let taken = q.events.filter(predicate)
                q.events.removeAll(where: predicate)
                return taken
            }
        }

        /// Events of which only the newest matters.
        private static func latestOnly(_ event: Event) -> Int? {
            switch event {
            case .signaling(.joined): 1
            case .signaling(.iceServers): 2
            case .signaling(.reconnecting): 3
            case .signaling(.tokenRenewed): 4
            case .cameraChanged: 5
            default: nil
            }
        }
    }
    private let events = EventQueue()
    private let log: @Sendable (LogMessage) -> Void
    private let stopRequested = Atomic<Bool>(false)
    /// The DTLS certificate of this endpoint, for every round (its fingerprint is in each description).
    private let certificate: DTLSCertificate
    /// Called about once a second while media flows (on a helper thread). May be set from any
    /// thread at any time: the call's threads read it through a lock.
    public var onStatus: (@Sendable (CallStatus) -> Void)? {
        get {
            guard statusSink.isSet else { return nil }
            return { [statusSink] status in _ = statusSink(status) }
        }
        set { statusSink.set(newValue) }
    }
    /// Room events as they happen (on the signaling or a helper thread); set from any thread.
    public var onEvent: (@Sendable (RoomEvent) -> Void)? {
        get {
            guard eventSink.isSet else { return nil }
            return { [eventSink] event in _ = eventSink(event) }
        }
        set { eventSink.set(newValue) }
    }
    private let statusSink = LockedCallback<CallStatus>()
    private let eventSink = LockedCallback<RoomEvent>()
    /// The media session running now, and the last status, for control commands.
    let current = Mutex<(media: CallMedia?, status: CallStatus?)>((nil, nil))
    private let signalingTLS: TLSContext?
    /// ICE servers the signaling service handed out in its last `joined`.
    private let serviceICEServers = Mutex<[ICEServer]>([])
    /// The endpoint's own token and ICE servers: the options' until `reload` replaces them.
    private let reloadable: Mutex<(token: String, iceServers: [ICEServer])>

    /// `media` nil: `Media.synthetic()`.
    public init(options: ConnectOptions, server: (host: String, port: Int), media: Media? = nil, duration: Duration?,
                log: @escaping @Sendable (LogMessage) -> Void = { _ in }) throws {
        self.options = options
        reloadable = Mutex((options.token, options.iceServers))
        signalingTLS = try Self.signalingTLS(options, server: server)
        self.server = server
        self.media = try media ?? .synthetic()
        self.duration = duration
        self.log = log
        certificate = try DTLSCertificate()
    }

    /// The TLS context for signaling, or nil for plain TCP, which is refused off loopback unless
    /// the options say `insecurePlaintext`. A CA file that cannot be read fails here, before
    /// anything is opened.
    static func signalingTLS(_ options: ConnectOptions, server: (host: String, port: Int)) throws -> TLSContext? {
        if options.signalingTLS == nil && !options.insecurePlaintext,
           let remote = ([server] + options.fallbackServers).first(where: { !PlaintextPolicy.isLoopback(host: $0.host) }) {
            throw ConfigurationError(PlaintextPolicy.refusal("signaling to \(remote.host):\(remote.port)"))
        }
        return try options.signalingTLS.map { tls throws(TLSError) in
            switch tls {
            case .systemTrust: try TLSContext(trustedCAFile: nil)
            case .caFile(let path): try TLSContext(trustedCAFile: path)
            }
        }
    }

    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        stopWake.signal()
        events.wake()
    }

    /// Signalled by stop(), for waits that must end early when the call does.
    private let stopWake = DispatchSemaphore(value: 0)
    /// The camera's loss and return events already in the log.
    private let cameraEventsLogged = Atomic<Int>(0)
    /// New sessions of the peer (each a new media round, with its own agent) and ICE restarts it
    /// offers (each a new agent): let through at a rate real endpoints need, not a flood's.
    private let newSessions = Mutex(RenegotiationLimit())
    private let clockOrigin = MediaTime.now
    private var elapsed: Duration { MediaTime.now - clockOrigin }

    /// Signaling from someone in the room who is not this round's peer: ignored, and logged once
    /// per sender and round.
    /// The audio route in the status, and each change the devices made by themselves in the log.
    private func reportRoute(_ status: inout CallStatus, logged: inout [Int]) {
        let microphone = media.audioTrack?.device, speaker = media.audioPlayout
        guard microphone != nil || speaker != nil else { return }
        status.audioRoute = "\(microphone?.route.capture ?? "none") -> \(speaker?.route.playback ?? "none")"
        var devices = [microphone].compactMap { $0 }
        if let speaker, !devices.contains(where: { $0 === speaker }) { devices.append(speaker) }
        let changes = devices.map(\.routeChanges)
        status.audioRouteChanges = changes.reduce(0) { $0 + $1.count }
        for (i, change) in changes.enumerated() where change.count > logged[i] {
            if let last = change.last { log("audio route: \(last)") }
            logged[i] = change.count
        }
    }

    /// This side's camera lost and back, in the log and as events, as the source says so (each
    /// once; those of a time with no media round, when the next one starts).
    private func reportCamera() {
        guard let events = media.videoTrack?.source.deviceEvents else { return }
        let logged = cameraEventsLogged.exchange(events.count, ordering: .relaxed)
        for event in events.dropFirst(logged) {
            if case .lost = event { log(.warning(event.line)) } else { log(LogMessage(.info, event.line)) }
            onEvent?(.camera(event))
        }
    }

    /// What the peer says of its own camera, in the log and as an event, within a tenth of a second.
    private func reportPeerCamera(peerNote: String?, lastPeerNote: inout String?, peer: String) {
        guard peerNote != lastPeerNote else { return }
        lastPeerNote = peerNote
        log(peerNote.map { "\(peer): \($0)" } ?? "\(peer): its video source is back")
        onEvent?(.peerVideoNote(participant: peer, note: peerNote))
    }

    private func ignore(_ message: RelayMessage, peer: String?, noted: inout Set<String>) {
        let who = message.from ?? "?"
        guard noted.insert(who).inserted else { return }
        log(.warning("signaling: ignored \(message.kind.rawValue) from \(who), who is not this call's peer \(peer ?? "(none yet)") (and any more from them this round)"))
    }

    /// The servers an ICE restart's agent uses now: the service's latest (their TURN credentials
    /// are renewed with the participant's), then the caller's own.
    private var currentICEServers: [ICEServer] { serviceICEServers.withLock { $0 } + reloadable.withLock { $0.iceServers } }

    /// New settings from a reloaded config file (`systemctl reload`, SIGHUP), without ending the
    /// call: the token the next join to the service presents (a rejoin after the service or the
    /// connection went), and the endpoint's own ICE servers for the next ICE restart and viewer.
    public func reload(token: String, iceServers: [ICEServer]) {
        reloadable.withLock { $0 = (token, iceServers) }
    }

    /// The ICE configuration of a round: the service's servers, then the caller's own.
    private func iceConfiguration(controlling: Bool) -> ICEAgent.Configuration {
        var options = options
        options.iceServers = reloadable.withLock { $0.iceServers }
        return Self.iceConfiguration(controlling: controlling, serviceServers: serviceICEServers.withLock { $0 }, options: options)
    }

    /// An agent's configuration: the service's STUN/TURN servers and the endpoint's own, its
    /// transport policy and local addresses.
    static func iceConfiguration(controlling: Bool, serviceServers: [ICEServer], options: ConnectOptions) -> ICEAgent.Configuration {
        var ice = ICEAgent.Configuration(controlling: controlling)
        ice.servers = serviceServers + options.iceServers
        ice.relayOnly = options.iceTransportPolicy == .relay
        ice.localAddresses = options.iceLocalAddresses
        return ice
    }

    public func run() throws -> CallSummary {
        let start = MediaTime.now
        let deadline = duration.map { start + $0 }
        var summary = CallSummary()
        var configuration = SignalingClientConfiguration(host: server.host, port: server.port, room: options.roomName,
                                                        token: { [self] in reloadable.withLock { $0.token } },
                                                        tls: signalingTLS)
        configuration.alternates = options.fallbackServers
        let queue = events
        media.videoTrack?.source.onDeviceEvent { _ in queue.append(.cameraChanged) }
        defer { media.videoTrack?.source.onDeviceEvent(nil) }
        let emit = eventSink
        let (log, room) = (self.log, options.roomName)
        let joinedClient = Mutex<SignalingClient?>(nil)
        var viewerEncoding = CallMedia.Encoding()
        viewerEncoding.mode = options.effectiveEncodingMode
        viewerEncoding.maxVideoBitrate = options.encodingParameters?.maxVideoBitrate ?? 2_500_000
        viewerEncoding.controlsCameraMode = false
        let viewers = ViewerHub(maxViewers: options.maxViewers, media: media, certificate: certificate, encoding: viewerEncoding,
                                ice: { [self] in iceConfiguration(controlling: false) }, log: log)
        configuration.eventHandler = { event in
            // WHEP players are the viewer hub's, beside the call.
            if case .message(let message) = event, ViewerHub.isViewer(message) {
                if let client = joinedClient.withLock({ $0 }) { viewers.handle(message, client: client) }
                return
            }
            if let roomEvent = RoomEvent(event) { emit(roomEvent) }
            // The signaling connection's ups and downs, for whoever reads the log (media goes on).
            switch event {
            case .reconnecting(let attempt, let delay, let reason):
                log(.warning("signaling: \(reason); reconnecting in \(delay.inSeconds.fixed(1)) s (attempt \(attempt))"))
            case .joined(_, _, rejoined: true):
                log("signaling: joined room \(room) again on \(joinedClient.withLock { $0?.currentServer } ?? "the service")")
            case .tokenRenewed(let expires):
                log("signaling: the service renewed this participant's credential (valid until \(expires))")
            default:
                break
            }
            queue.append(.signaling(event))
        }
        let client = SignalingClient(configuration: configuration)
        joinedClient.withLock { $0 = client }
        client.start()
        defer {
            client.stop()
            // The client's event handler holds this box (and the viewers, and through them the
            // media): emptied, the client and its handler go, and the devices' handles with them.
            joinedClient.withLock { $0 = nil }
            media.close()
        }

        // Rounds of media: when the peer leaves or vanishes this side stays in the room, and a
        // peer that joins again (and, joining second, offers) gets media without a restart here.
        var round = 0
        while !stopRequested.load(ordering: .relaxed) && deadline.map({ MediaTime.now < $0 }) ?? true {
            // A peer that comes back as a new session again and again gets its rounds at the
            // limiter's rate: each holds an ICE agent (a thread, sockets, a TURN allocation).
            while !newSessions.withLock({ $0.allow(at: elapsed) }) && !stopRequested.load(ordering: .relaxed) {
                let wait = newSessions.withLock { $0.wait(at: elapsed) }
                log(.warning("the peer came back as a new session \(newSessions.withLock { $0.burst }.fixed(0)) times in a short while: the next round in \(wait.inSeconds.fixed(1)) s"))
                if stopWake.wait(for: wait) { stopWake.signal() }
            }
            round += 1
            let signaling = RoundSignaling(client: client)
            guard let (callMedia, call, controller) = try negotiate(round: round, signaling: signaling, summary: &summary, deadline: deadline) else { break }
            summary.mediaRounds += 1
            let streams = call.streams.map { s in
                "\(s.kind.rawValue) \(s.codec.name)\(s.codec.ulpfecPayloadType == nil ? "" : " with ULPFEC in RED") \(JSEPDescription.Direction(sends: s.sends, receives: s.receives).rawValue)"
                    + (s.receivedCodec.map { $0.name == s.codec.name ? "" : " (the peer sends \($0.name))" } ?? "")
            }
            let data = call.data.map { ", data channels (SCTP port \($0.remotePort), messages up to \($0.maxMessageSize == 0 ? "any size" : "\($0.maxMessageSize) bytes"))" } ?? ""
            log("media: \(streams.joined(separator: ", "))\(data) over ICE + DTLS-SRTP (BUNDLE)")
            if call.data == nil, media.dataTrack != nil { log(.warning("data: the peer takes no data channels (its description has none)")) }
            let roundStart = MediaTime.now
            let result: (sent: SenderStatistics, received: ReceiverSummary)
            do {
                result = try runMedia(callMedia, call, controller, round: round, signaling: signaling, participant: summary.participant,
                                      peer: summary.peer ?? "?", remaining: deadline.map { $0 - MediaTime.now }, viewersEncoder: viewers.fanout)
            } catch let error as NegotiationError {
                // No path to the peer (ICE or DTLS failed): wait for the peer to try again.
                callMedia.transport.close()
                summary.endReason = error.description
                log("\(error.description): waiting for \(summary.peer ?? "the peer") to join again")
                if let peer = summary.peer { onEvent?(.participantLeft(peer, reason: error.description)) }
                continue
            } catch let error as CallSecurityError {
                // The peer's certificate is not the one its description named (someone on the
                // signaling path, or a peer that lies): no media went to it, since DTLS refused it.
                // That round ends; the endpoint stays and will authenticate whoever comes next
                // the same way, so ending it would only let one liar stop it.
                callMedia.transport.close()
                summary.endReason = error.description
                log(.error("dtls: \(error.description): the session with \(summary.peer ?? "the peer") ends; waiting for the peer to join again"))
                if let peer = summary.peer {
                    Self.refuse(peer, "its DTLS certificate does not match its description's fingerprint", status: 403, client: client, log: log)
                    onEvent?(.participantLeft(peer, reason: error.description))
                }
                continue
            }
            callMedia.transport.close()
            summary.sent = result.sent
            summary.received = result.received
            if summary.setupTime == nil, let first = result.received.firstFrameAt {
                summary.setupTime = (roundStart - start) + first
            }
            // Both sides ending on time send BYE to each other; that is the call's end, not a departure.
            let outOfTime = deadline.map { MediaTime.now >= $0 - .seconds(2) } ?? false
            summary.endReason = stopRequested.load(ordering: .relaxed) && !outOfTime ? "stopped"
                : result.received.endReason.isEmpty || outOfTime ? "done" : result.received.endReason
            if summary.endReason == "done" || summary.endReason == "stopped" { break }
            if let peer = summary.peer { onEvent?(.participantLeft(peer, reason: summary.endReason)) }
            log(result.received.endReason == Self.newSessionReason ? "\(summary.peer ?? "the peer") came back as a new session: a new round of media"
                : "\(summary.endReason): waiting for \(summary.peer ?? "the peer") to join again")
        }
        if stopRequested.load(ordering: .relaxed), summary.endReason.isEmpty || summary.mediaRounds > 0 && summary.endReason != "done" { summary.endReason = "stopped" }
        viewers.stopAll(client: client)
        onEvent?(.disconnected(reason: summary.endReason))
        // The bye goes before the client stops (a stopped client drops what is unsent).
        if let peer = summary.peer { _ = client.waitAcknowledged(client.send(RelayMessage(kind: .bye, id: "", to: peer)), within: .milliseconds(500)) }
        return summary
    }

    /// Who the round's peer is, and the trickled candidates that wait for the description to go
    /// first (a candidate before the offer or answer would reach a peer with nothing to add it to).
    final class RoundSignaling: @unchecked Sendable {  // used by the call thread, then by the round's watcher thread, never both at once
        let client: SignalingClient
        var peer: String?
        var described = false
        var pending: [(payload: JSONValue, ufrag: String)] = []

        init(client: SignalingClient) { self.client = client }

        /// A local candidate ("candidate:..."), or the end of them (""), of the agent with `ufrag`.
        func candidate(_ line: String, ufrag: String) {
            let payload = JSONValue.object(["candidate": .string(line), "sdpMid": .string("0"), "sdpMLineIndex": .number(0),
                                            "usernameFragment": .string(ufrag)])
            if described, let peer {
                client.send(RelayMessage(kind: .candidate, id: "", to: peer, payload: payload))
            } else {
                pending.append((payload, ufrag))
            }
        }

        /// Sends the offer or answer, then whatever candidates were waiting.
        func describe(_ description: JSEPDescription, to peer: String) {
            self.peer = peer
            let payload = JSONValue.object(["type": .string(description.type.rawValue), "sdp": .string(description.sdp)])
            client.send(RelayMessage(kind: description.type == .offer ? .offer : .answer, id: "", to: peer, payload: payload))
            described = true
            // Only the described agent's own: an agent closed before (a refused offer) gathered too.
            for p in pending where p.ufrag == description.transport.ufrag { client.send(RelayMessage(kind: .candidate, id: "", to: peer, payload: p.payload)) }
            pending = []
        }
    }

    /// The session description in a signaling payload: {"type": "offer"|"answer", "sdp": "..."}.
    static func description(_ payload: JSONValue?, as type: JSEPDescription.SDPType) throws(NegotiationError) -> JSEPDescription {
        guard case .object(let fields)? = payload, case .string(let sdp)? = fields["sdp"] else {
            throw NegotiationError("the \(type.rawValue) carries no \"sdp\" string")
        }
        if case .string(let stated)? = fields["type"], stated != type.rawValue {
            throw NegotiationError("a message of type \(type.rawValue) says its description is an \(stated)")
        }
        do { return try JSEPDescription(type: type, sdp: sdp) } catch { throw NegotiationError("the peer's \(type.rawValue): \(error)") }
    }

    /// The service's servers as the ICE agent takes them; a URL it cannot use is left out.
    static func iceServers(_ list: [ICEServerInfo]) -> [ICEServer] {
        list.flatMap { info in info.urls.compactMap { try? ICEServer(url: $0, username: info.username, credential: info.credential) } }
    }

    /// A trickled candidate: {"candidate": "candidate:..." | "" (no more), "sdpMid", "sdpMLineIndex",
    /// "usernameFragment" (optional: the ICE generation it belongs to)}.
    static func candidate(_ payload: JSONValue?) -> (line: String, ufrag: String?)? {
        guard case .object(let fields)? = payload, case .string(let line)? = fields["candidate"] else { return nil }
        if case .string(let ufrag)? = fields["usernameFragment"], !ufrag.isEmpty { return (line, ufrag) }
        return (line, nil)
    }

    private func apply(candidate: (line: String, ufrag: String?), to transport: BundleTransport) {
        if candidate.line.isEmpty {
            transport.remoteGatheringDone(ufrag: candidate.ufrag)
        } else if let error = Result(catching: { try transport.addRemoteCandidate(candidate.line, ufrag: candidate.ufrag) }).failure {
            log(.warning("ice: \(error)"))
        }
    }

    /// A WHIP client publishing into the room through `serve --http` (its session's name).
    static func isWHIPPublisher(_ participant: String) -> Bool { participant.hasPrefix("whip~") }

    /// Refuses one session: a bye to that peer with the reason, and for a WHIP publisher the
    /// status the service answers its POST with (409 busy, 422 an offer callend cannot use).
    /// The endpoint and its other sessions go on.
    static func refuse(_ peer: String, _ reason: String, status: Int, client: SignalingClient, log: (LogMessage) -> Void) {
        log(.warning("\(isWHIPPublisher(peer) ? "whip" : "signaling"): refused \(peer): \(reason)"))
        _ = client.send(RelayMessage(kind: .bye, id: "", to: peer, payload: .object([
            "reason": .string(reason), "status": .number(Double(status)),
        ])))
    }

    /// The candidates the round's agent (`ufrag`) gathers within two seconds, taken from the event
    /// queue (they go in the answer instead of trickling), and whether gathering finished.
    private func gatheredCandidates(round: Int, ufrag: String) -> (candidates: [String], complete: Bool) {
        let queue = events
        func taken() -> [BundleTransport.Event?] {
            queue.take { event in
                switch event {
                case .transport(round, .localCandidate(_, ufrag)), .transport(round, .gatheringDone(ufrag)): true
                default: false
                }
            }.map { if case .transport(_, let event) = $0 { event } else { nil } }
        }
        return CallMedia.gather(for: ViewerHub.gatheringWait, stopped: { stopRequested.load(ordering: .relaxed) }) { wait in
            let ready = taken()
            if !ready.isEmpty { return ready }
            queue.wait(timeout: wait)  // woken by each event that comes, and by stop()
            return taken()
        }
    }

    /// Signaling until an offer/answer completes; nil when stopped or out of time first.
    private func negotiate(round: Int, signaling: RoundSignaling, summary: inout CallSummary,
                           deadline: MediaTime?) throws -> (CallMedia, NegotiatedCall, SessionController)? {
        var callMedia: CallMedia?
        /// The round's session, made with its agent: it trickles and logs the transport's events.
        var controller: SessionController?
        var offer: JSEPDescription?
        var early: [(from: String?, candidate: (line: String, ufrag: String?))] = []
        var noted: Set<String> = []
        let queue = events
        func roundMedia(controlling: Bool) throws -> CallMedia {
            if let callMedia { return callMedia }
            let made = try CallMedia(media: media, ice: iceConfiguration(controlling: controlling), certificate: certificate) { event in
                queue.append(.transport(round: round, event))
            }
            let log = self.log
            made.onDataAborted = { why in log(.warning("data: aborted the data channels' association: \(why); media goes on")) }
            callMedia = made
            controller = SessionController(.init(offerer: controlling, restarts: .offers, gatheringWait: ViewerHub.gatheringWait, peer: "?"))
            return made
        }
        while !stopRequested.load(ordering: .relaxed) && deadline.map({ MediaTime.now < $0 }) ?? true {
            let pending = events.drain()
            if pending.isEmpty {
                // Until an event, stop() (it wakes the queue) or the duration's end.
                events.wait(timeout: deadline.map { $0 - .now } ?? .seconds(3600))
                continue
            }
            var negotiated: NegotiatedCall?
            for event in pending {
                switch event {
                case .signaling(.joined(let me, let peers, _)) where callMedia == nil:
                    summary.participant = me
                    log("joined room \(options.roomName) as \(me)\(peers.isEmpty ? ", waiting for a peer" : ", offering to \(peers[0])")")
                    if let peer = peers.first {
                        summary.peer = peer
                        let made = try roundMedia(controlling: true)
                        let description = made.offer()
                        offer = description
                        signaling.describe(description, to: peer)
                    }
                case .signaling(.message(let message)) where message.kind == .offer:
                    guard let from = message.from else { continue }
                    // Once this round has its peer, nobody else in the room negotiates with it.
                    if let peer = signaling.peer, peer != from {
                        if Self.isWHIPPublisher(from) {
                            Self.refuse(from, "the room's endpoint is in a call with \(peer); publish when it is free", status: 409, client: signaling.client, log: log)
                        } else {
                            ignore(message, peer: peer, noted: &noted)
                        }
                        continue
                    }
                    // An offer callend cannot use is refused to its sender alone (a bye with the
                    // reason; a WHIP publisher's POST gets 422): the round goes on waiting.
                    let theirs: JSEPDescription
                    do { theirs = try Self.description(message.payload, as: .offer) } catch {
                        Self.refuse(from, error.description, status: 422, client: signaling.client, log: log)
                        continue
                    }
                    // A new offer replaces one of ours (both joined at once): the later joiner offers.
                    if let stale = callMedia, offer != nil { stale.transport.close(); callMedia = nil; offer = nil }
                    let made: CallMedia
                    var answer: JSEPDescription, call: NegotiatedCall
                    do {
                        made = try roundMedia(controlling: false)
                        (answer, call) = try made.answer(theirs)
                    } catch {
                        callMedia?.transport.close()
                        callMedia = nil
                        Self.refuse(from, "\(error)", status: error is NegotiationError ? 422 : 503, client: signaling.client, log: log)
                        continue
                    }
                    summary.peer = from
                    if Self.isWHIPPublisher(from) {
                        // A WHIP publisher takes no trickle from the server: the answer carries the candidates.
                        (answer.transport.candidates, answer.transport.endOfCandidates) = gatheredCandidates(round: round, ufrag: made.localTransport.ufrag)
                        log("whip: \(from) publishes into the room: its media is this call's peer's")
                    }
                    signaling.describe(answer, to: from)
                    negotiated = call
                case .signaling(.message(let message)) where message.kind == .answer:
                    guard let made = callMedia, let ours = offer else { continue }
                    guard message.from == signaling.peer else {
                        ignore(message, peer: signaling.peer, noted: &noted)
                        continue
                    }
                    do {
                        negotiated = try made.accept(try Self.description(message.payload, as: .answer), to: ours)
                    } catch {
                        // An answer callend cannot use ends this offer, not the endpoint: the peer
                        // hears why, and the round waits for it (or anyone) to start again.
                        Self.refuse(message.from ?? "?", "its answer: \(error)", status: 422, client: signaling.client, log: log)
                        made.transport.close()
                        (callMedia, offer, signaling.peer, signaling.described, summary.peer) = (nil, nil, nil, false, nil)
                        continue
                    }
                case .signaling(.message(let message)) where message.kind == .bye:
                    // The peer refused our offer: it hears no more of it, and the round waits.
                    guard let refusal = Self.refusal(message), let peer = signaling.peer, message.from == peer else { continue }
                    log(.warning("signaling: \(peer) refused the session: \(refusal)"))
                    callMedia?.transport.close()
                    (callMedia, offer, signaling.peer, signaling.described, summary.peer) = (nil, nil, nil, false, nil)
                    onEvent?(.participantLeft(peer, reason: "refused the session: \(refusal)"))
                case .signaling(.message(let message)) where message.kind == .candidate:
                    guard let candidate = Self.candidate(message.payload) else { continue }
                    if let peer = signaling.peer, message.from != peer {
                        ignore(message, peer: peer, noted: &noted)
                        continue
                    }
                    if let made = callMedia, signaling.peer != nil {
                        apply(candidate: candidate, to: made.transport)
                    } else if early.count < Self.maxEarlyCandidates {
                        // Kept for a peer not known yet; anyone in the room can send them, so not without end.
                        early.append((message.from, candidate))
                    }
                case .signaling(.iceServers(let list)):
                    let servers = Self.iceServers(list)
                    serviceICEServers.withLock { $0 = servers }
                    if !servers.isEmpty { log("ice: servers from the service: \(servers.map(\.url).joined(separator: ", "))") }
                case .signaling(.closed(let reason)):
                    throw NegotiationError("signaling closed: \(reason)")
                case .signaling(.serverError(let code, let text)):
                    log(.warning("signaling: \(code.rawValue): \(text)"))
                case .signaling(.joined(_, _, _)), .signaling(.peerJoined), .signaling(.peerLeft), .signaling(.reconnecting),
                     .signaling(.undelivered), .signaling(.message), .signaling(.tokenRenewed):
                    break
                case .cameraChanged:
                    reportCamera()
                case .transport(let r, let e):
                    // Transport events come only from the round's agent, made with its controller.
                    guard r == round, var roundController = controller else { continue }
                    defer { controller = roundController }
                    for action in roundController.handle(.transport(e), at: MonotonicClock().now) {
                        switch action {
                        case .log(let message): log(message)
                        case .trickle(let line, let ufrag): signaling.candidate(line, ufrag: ufrag)
                        default: break  // nothing else comes of a transport event before the session is set up
                        }
                    }
                }
            }
            if let made = callMedia, let peer = signaling.peer {
                // Candidates that came before the round knew its peer: the peer's only.
                for (from, candidate) in early where from == peer { apply(candidate: candidate, to: made.transport) }
                early = []
            }
            if let negotiated, let made = callMedia, var controller {
                controller.configuration.peer = signaling.peer ?? "?"
                return (made, negotiated, controller)
            }
        }
        callMedia?.transport.close()
        return nil
    }

    /// Runs one round of media. The peer's bye ends it early, and so does an offer of a new
    /// session (the peer came back as a new process; the offer stays queued for the next round).
    /// peer-left does not: it only says the peer's signaling connection dropped, and media may
    /// well go on. Neither does silence: a lost path is looked for again (see `ICERestartPolicy`),
    /// and an offer in this session (an ICE restart) is answered here. Candidates keep trickling
    /// both ways while media runs.
    static let newSessionReason = "the peer came back as a new session"
    /// Candidates kept while a round has no peer yet (libnice takes 25 per component anyway).
    static let maxEarlyCandidates = 64

    private func runMedia(_ callMedia: CallMedia, _ call: NegotiatedCall, _ controller: SessionController, round: Int, signaling: RoundSignaling, participant: String,
                          peer: String, remaining: Duration?, viewersEncoder: VideoFanout?) throws -> (sent: SenderStatistics, received: ReceiverSummary) {
        let roundOver = Atomic<Bool>(false)
        let newSession = Atomic<Bool>(false)
        let publisherLeft = Atomic<Bool>(false)
        let refusedBy = Mutex<String?>(nil)
        let watcherDone = DispatchSemaphore(value: 0)
        startThread(named: "call-watcher") { [self] in
            defer { watcherDone.signal() }
            var controller = controller
            var noted: Set<String> = []
            var addresses = LocalAddressWatch()
            let clock = MonotonicClock()
            var over = false
            /// The events of a pass not handled yet, for an offer of a new session to leave to the next round.
            var unhandled: ArraySlice<Event> = []
            func perform(_ actions: [SessionController.Action]) {
                for action in actions {
                    switch action {
                    case .log(let message): self.log(message)
                    case .trickle(let line, let ufrag): signaling.candidate(line, ufrag: ufrag)
                    case .addRemoteCandidate(let line, let ufrag): apply(candidate: (line, ufrag), to: callMedia.transport)
                    case .restartICE:
                        do {
                            let offer = try callMedia.restartOffer(servers: currentICEServers)
                            signaling.describe(offer, to: peer)
                            perform(controller.handle(.restartBegan(ufrag: offer.transport.ufrag, password: offer.transport.password), at: clock.now))
                        } catch {
                            perform(controller.handle(.restartFailed("\(error)"), at: clock.now))
                        }
                    case .answer(let offer):
                        do {
                            let (answer, restartsICE) = try callMedia.answerRestart(offer, servers: currentICEServers)
                            signaling.describe(answer, to: peer)
                            perform(controller.handle(.answered(restartsICE: restartsICE), at: clock.now))
                        } catch {
                            self.log(.warning("ice: the peer's restart offer: \(error)"))
                        }
                    case .accept(let answer):
                        do { try callMedia.acceptRestart(answer) } catch { self.log(.warning("ice: the peer's answer to our restart: \(error)")) }
                    case .answerRestartFragment(let ufrag, let password, let candidates):
                        do {
                            let mine = try callMedia.transport.restartICE(controlling: false, servers: currentICEServers)
                            try callMedia.acceptRestart(ufrag: ufrag, password: password, candidates: candidates)
                            perform(controller.handle(.restartBegan(ufrag: mine.ufrag, password: mine.password), at: clock.now))
                        } catch {
                            perform(controller.handle(.restartFailed("\(error)"), at: clock.now))
                        }
                    case .sendRestartFragment(let fragment):
                        _ = signaling.client.send(RelayMessage(kind: .answer, id: "", to: peer, payload: .object(["type": .string("answer"), "sdp": .string(fragment.serialized)])))
                    case .reconnectSignaling(let why): signaling.client.reconnect(because: why)
                    case .secured: break
                    case .end(let reason):
                        over = true
                        switch reason {
                        case .bye: if Self.isWHIPPublisher(peer) { publisherLeft.store(true, ordering: .relaxed) }
                        case .refused(let refusal): refusedBy.withLock { $0 = refusal }
                        case .newSession:
                            // The next round takes it, with whatever came after it.
                            events.prepend(Array(unhandled))
                            newSession.store(true, ordering: .relaxed)
                        case .repost: break
                        }
                    }
                }
            }
            // Every 100 ms: track subscriptions (first decoded video / audio); every second: status.
            var previous: (sent: SenderStatistics, received: ReceiverSummary)?
            var subscribed = (video: false, audio: false)
            var tick = 0
            var outageSince: Duration?
            var lastPicture: (count: Int, at: Duration?) = (0, nil)
            // Memory the buffers of an outage filled goes back to the kernel after it, and every
            // ten minutes (see releaseFreeMemory).
            var trimAfter = 6000
            var routeChangesLogged = [0, 0]
            var lastPeerNote: String?
            var nextReport = clock.now + .milliseconds(100)
            func report() {
                tick += 1
                guard let now = callMedia.statistics() else { return }
                if let since = now.received.silentSince, outageSince == nil {
                    outageSince = since
                    self.log(.warning("peer silent for 4.0 s: waiting for the path to return (outage \(now.received.outages))"))
                } else if now.received.silentSince == nil, let since = outageSince {
                    outageSince = nil
                    self.log(LogMessage(.info, "media back after \((now.received.elapsed - since).inSeconds.fixed(1)) s of silence"))
                    trimAfter = tick + 50  // once the backlog of the outage has drained
                }
                // A stall of a second or more and its end, for whoever reads the log.
                if now.received.framesDecoded != lastPicture.count {
                    if let at = lastPicture.at, now.received.elapsed - at >= .seconds(1) {
                        self.log(LogMessage(.info, "video: decoding again after \((now.received.elapsed - at).inSeconds.fixed(1)) s without a picture"))
                    }
                    lastPicture = (now.received.framesDecoded, now.received.elapsed)
                }
                if !subscribed.video && now.received.framesDecoded > 0 {
                    subscribed.video = true
                    onEvent?(.trackSubscribed(participant: peer, kind: .video))
                }
                if !subscribed.audio && now.received.audioDecoded > 0 {
                    subscribed.audio = true
                    onEvent?(.trackSubscribed(participant: peer, kind: .audio))
                }
                if tick >= trimAfter {
                    releaseFreeMemory()
                    trimAfter = tick + 6000
                }
                reportPeerCamera(peerNote: now.received.peerVideoNote, lastPeerNote: &lastPeerNote, peer: peer)
                guard tick % 10 == 0 else { return }
                var status = CallStatus.between(previous, now, participant: participant)
                status.cameraLost = media.videoTrack?.source.lostReason
                status.candidatePair = callMedia.transport.selectedPair?.description
                status.iceRestarts = controller.restarts
                reportRoute(&status, logged: &routeChangesLogged)
                if let voice = media.audioTrack?.device.voiceStats {
                    (status.echoERLEdB, status.echoDelayMs, status.voiceActive, status.echoRestarts) = (voice.erleDB, voice.measuredDelayMilliseconds, voice.voice, voice.restarts)
                }
                current.withLock { $0.status = status }
                onStatus?(status)
                onEvent?(.stats(status))
                previous = now
            }
            while !over && !roundOver.load(ordering: .relaxed) && !stopRequested.load(ordering: .relaxed) {
                let handled = events.take { event in
                    switch event {
                    case .signaling(.message(let m)): return [.bye, .candidate, .offer, .answer].contains(m.kind)
                    case .signaling(.iceServers): return true
                    case .transport, .cameraChanged: return true
                    default: return false
                    }
                }
                for (index, event) in handled.enumerated() where !over {
                    unhandled = handled[index...]
                    if case .signaling(.message(let m)) = event, m.from != peer {
                        ignore(m, peer: peer, noted: &noted)
                        continue
                    }
                    let input: SessionController.Event
                    switch event {
                    case .cameraChanged:
                        reportCamera()
                        continue
                    case .signaling(.iceServers(let list)):
                        // Renewed with the credential: the next restart's agent uses them.
                        serviceICEServers.withLock { $0 = Self.iceServers(list) }
                        continue
                    case .signaling(.message(let m)) where m.kind == .bye:
                        input = .bye(refusal: Self.refusal(m))
                    case .signaling(.message(let m)) where m.kind == .candidate:
                        guard let candidate = Self.candidate(m.payload) else { continue }
                        input = .peerCandidate(line: candidate.line, ufrag: candidate.ufrag)
                    case .signaling(.message(let m)) where m.kind == .offer && m.payload["iceRestart"] != nil:
                        // A WHIP publisher's ICE restart by PATCH: credentials and candidates only.
                        guard case .object(let fields)? = m.payload["iceRestart"], case .string(let ufrag)? = fields["ufrag"],
                              case .string(let password)? = fields["pwd"] else { continue }
                        let candidates: [String] = if case .array(let list)? = fields["candidates"] { list.compactMap(\.stringValue) } else { [] }
                        input = .peerRestartFragment(ufrag: ufrag, password: password, candidates: candidates)
                    case .signaling(.message(let m)) where m.kind == .offer:
                        do {
                            let offer = try Self.description(m.payload, as: .offer)
                            input = .peerOffer(offer, continuesSession: callMedia.continuesSession(offer))
                        } catch {
                            input = .unreadableOffer("\(error)")
                        }
                    case .signaling(.message(let m)) where m.kind == .answer:
                        do { input = .peerAnswer(try Self.description(m.payload, as: .answer)) } catch {
                            if controller.awaitingAnswer { self.log(.warning("ice: the peer's answer to our restart: \(error)")) }
                            continue
                        }
                    case .transport(let r, let e) where r == round:
                        input = .transport(e)
                    default: continue
                    }
                    perform(controller.handle(input, at: clock.now))
                }
                if over {
                    callMedia.stop()
                    break
                }
                let now = clock.now
                let changed = addresses.changed(at: now).map { (before: Array($0), now: Array(addresses.addresses)) }
                if changed != nil || controller.nextTick.map({ now >= $0 }) ?? false {
                    perform(controller.handle(.tick(addressesChanged: changed), at: now))
                }
                if over {
                    callMedia.stop()
                    break
                }
                if now >= nextReport {
                    report()
                    nextReport = max(nextReport + .milliseconds(100), now)
                }
                // Until the next event or report, or the controller's next moment if sooner.
                let until = min(nextReport, controller.nextTick ?? nextReport)
                events.wait(timeout: until > now ? until - now : .zero)
            }
            if stopRequested.load(ordering: .relaxed) { callMedia.stop() }
        }
        current.withLock { $0.media = callMedia }
        defer {
            roundOver.store(true, ordering: .relaxed)
            // The watcher reads the queue the next round reads: woken and waited for, it takes
            // neither the next round's events nor its wake-ups (a stop() in the next round's
            // negotiation once woke only this watcher, and the call went on to its duration's end).
            events.wake()
            if !watcherDone.wait(for: .seconds(10)) { log(.warning("the round's watcher did not end within 10 s")) }
            current.withLock { $0.media = nil }
        }
        var encoding = CallMedia.Encoding()
        encoding.mode = options.effectiveEncodingMode
        encoding.maxVideoBitrate = options.encodingParameters?.maxVideoBitrate ?? 2_500_000
        let log = self.log
        encoding.onDecision = { decision in log("\(decision.line)") }
        // While viewers watch, the peer takes their shared encoder: one encode for all.
        encoding.fanoutWhenWatched = viewersEncoder
        /// Why the round ended, when the peer refused the session.
        func refusal() -> String? { refusedBy.withLock { $0 }.map { "\(peer) refused the session: \($0)" } }
        var result: (sent: SenderStatistics, received: ReceiverSummary)
        do {
            result = try callMedia.run(call, media: media, encoding: encoding, duration: remaining)
        } catch let error as NegotiationError {
            // A refusal that came before the connection was up stopped the wait for it: the round
            // ends with the refusal's reason, not "stopped before the connection was up" (which
            // hid why from the peer whose certificate was refused, whenever the refusal beat DTLS).
            throw refusal().map(NegotiationError.init) ?? error
        }
        if newSession.load(ordering: .relaxed) { result.received.endReason = Self.newSessionReason }
        // A WHIP publisher's DELETE ends its session, not this endpoint: the next one is waited for.
        // Its RTCP BYE says the same, and may come before the service's bye for the DELETE.
        if publisherLeft.load(ordering: .relaxed) || Self.isWHIPPublisher(peer) && result.received.endedByPeerBye {
            result.received.endReason = "the WHIP publisher ended its session"
        }
        // A refusal ends this session, not the call: the peer may come back with another.
        if let refusal = refusal() { result.received.endReason = refusal }
        return result
    }

    /// The reason of a bye that refuses a session (it carries a status, as the endpoint's own
    /// refusals do), as opposed to a bye that ends a call; nil for the latter.
    static func refusal(_ bye: RelayMessage) -> String? {
        guard bye.kind == .bye, bye.payload["status"]?.integer(in: 400...599) != nil else { return nil }
        let reason = bye.payload["reason"]?.stringValue ?? "no reason given"
        return String(reason.prefix(300))
    }
}

extension Result where Failure == any Error {
    var failure: (any Error)? { if case .failure(let e) = self { return e }; return nil }
}
