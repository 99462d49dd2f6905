import Foundation
import Platform
import RTPTransport
import Signaling
import Synchronization

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
public final class Call: @unchecked Sendable {  // the event queue is guarded by `events`; everything else is used on the run thread
    /// What the call publishes and where the peer's media goes. The call closes all of it when it ends.
    public struct Media: Sendable {
        public var videoTrack: LocalVideoTrack?
        public var audioTrack: LocalAudioTrack?
        public var renderers: [any VideoRenderer]
        public var audioPlayout: (any AudioDevice)?

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
        }
    }

    public let options: ConnectOptions
    public let server: (host: String, port: Int)
    public let media: Media
    public let duration: Duration?
    /// The address the peer should send media to; the local address toward the server by default.
    public let advertisedHost: String
    /// Signaling events, filled on the client's thread and drained here.
    final class EventQueue: Sendable {
        private let items = Mutex<[SignalingEvent]>([])
        func append(_ event: SignalingEvent) { items.withLock { $0.append(event) } }
        func drain() -> [SignalingEvent] { items.withLock { e in defer { e.removeAll() }; return e } }
        func contains(where predicate: (SignalingEvent) -> Bool) -> Bool { items.withLock { $0.contains(where: predicate) } }
        /// Removes the matching events and says how many there were.
        func removeAll(where predicate: (SignalingEvent) -> Bool) -> Int {
            items.withLock { e in
                let before = e.count
                e.removeAll(where: predicate)
                return before - e.count
            }
        }
    }
    private let events = EventQueue()
    private let log: @Sendable (String) -> Void
    private let stopRequested = Atomic<Bool>(false)
    /// Called about once a second while media flows (on a helper thread).
    public var onStatus: (@Sendable (CallStatus) -> Void)?
    /// Room events as they happen (on the signaling or a helper thread).
    public var onEvent: (@Sendable (RoomEvent) -> Void)?
    /// The media session running now, and the last status, for control commands.
    let current = Mutex<(media: CallMedia?, status: CallStatus?)>((nil, nil))

    /// `media` nil: `Media.synthetic()`.
    public init(options: ConnectOptions, server: (host: String, port: Int), media: Media? = nil, duration: Duration?,
                advertisedHost: String? = nil, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.options = options
        self.server = server
        self.media = try media ?? .synthetic()
        self.duration = duration
        self.log = log
        self.advertisedHost = try advertisedHost ?? UDPAddress.localAddress(toward: server.host, port: server.port)
    }

    public func stop() { stopRequested.store(true, ordering: .relaxed) }

    public func run() throws -> CallSummary {
        let start = ContinuousClock.now
        let deadline = duration.map { start + $0 }
        var summary = CallSummary()
        let token = options.token
        var configuration = SignalingClientConfiguration(host: server.host, port: server.port, room: options.roomName, token: { token })
        let queue = events
        let emit = onEvent
        let (log, room) = (self.log, options.roomName)
        configuration.eventHandler = { event in
            if let emit, let roomEvent = RoomEvent(event) { emit(roomEvent) }
            // The signaling connection's ups and downs, for whoever reads the log (media goes on).
            switch event {
            case .reconnecting(let attempt, let delay, let reason):
                log(String(format: "signaling: %@; reconnecting in %.1f s (attempt %d)", reason, Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18, attempt))
            case .joined(_, _, rejoined: true):
                log("signaling: joined room \(room) again")
            default:
                break
            }
            queue.append(event)
        }
        let client = SignalingClient(configuration: configuration)
        client.start()
        defer {
            client.stop()
            media.close()
        }

        // Rounds of media: when the peer leaves or vanishes this side stays in the room, and a
        // peer that joins again (and, joining second, offers) gets media without a restart here.
        while !stopRequested.load(ordering: .relaxed) && deadline.map({ ContinuousClock.now < $0 }) ?? true {
            let callMedia = try CallMedia(listenHost: "0.0.0.0", srtp: options.srtpEnabled)
            let local = callMedia.localDescription(candidateHost: advertisedHost)
            guard let call = try negotiate(local: local, client: client, summary: &summary, deadline: deadline) else { break }
            summary.mediaRounds += 1
            log("media: \(call.streams.map { "\($0.kind) \($0.codec.name) to \(call.remoteHost):\($0.remotePort)" }.joined(separator: ", "))\(call.srtp == nil ? "" : ", SRTP")")
            let roundStart = ContinuousClock.now
            let result = try runMedia(callMedia, call, participant: summary.participant, peer: summary.peer ?? "?", remaining: deadline.map { $0 - ContinuousClock.now })
            summary.sent = result.sent
            summary.received = result.received
            if summary.setupTime == nil, let first = result.received.firstFrameAt {
                summary.setupTime = (roundStart - start) + first
            }
            // Both sides ending on time send BYE to each other; that is the call's end, not a departure.
            let outOfTime = deadline.map { ContinuousClock.now >= $0 - .seconds(2) } ?? false
            summary.endReason = stopRequested.load(ordering: .relaxed) && !outOfTime ? "stopped"
                : result.received.endReason.isEmpty || outOfTime ? "done" : result.received.endReason
            if summary.endReason == "done" || summary.endReason == "stopped" { break }
            if let peer = summary.peer { onEvent?(.participantLeft(peer, reason: summary.endReason)) }
            log("\(summary.endReason): waiting for \(summary.peer ?? "the peer") to join again")
        }
        if stopRequested.load(ordering: .relaxed), summary.endReason.isEmpty { summary.endReason = "stopped" }
        onEvent?(.disconnected(reason: summary.endReason))
        if let peer = summary.peer { client.send(RelayMessage(kind: .bye, id: "", to: peer)) }
        usleep(100_000)
        return summary
    }

    private func payload(_ description: CallSessionDescription) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: try description.json())
    }

    private func description(from value: JSONValue) throws -> CallSessionDescription {
        try CallSessionDescription(json: try JSONEncoder().encode(value))
    }

    /// Signaling until an offer/answer completes; nil when stopped or out of time first.
    private func negotiate(local: CallSessionDescription, client: SignalingClient, summary: inout CallSummary,
                           deadline: ContinuousClock.Instant?) throws -> NegotiatedCall? {
        while !stopRequested.load(ordering: .relaxed) && deadline.map({ ContinuousClock.now < $0 }) ?? true {
            let pending = events.drain()
            if pending.isEmpty {
                usleep(5_000)
                continue
            }
            var negotiated: NegotiatedCall?
            for event in pending {
                switch event {
                case .joined(let me, let peers, _):
                    summary.participant = me
                    log("joined room \(options.roomName) as \(me)\(peers.isEmpty ? ", waiting for a peer" : ", offering to \(peers[0])")")
                    if let peer = peers.first {
                        summary.peer = peer
                        client.send(RelayMessage(kind: .offer, id: "", to: peer, payload: try payload(local)))
                    }
                case .message(let message) where message.kind == .offer:
                    let offer = try description(from: message.payload)
                    let answer = try OfferAnswer.answer(offer, local: local)
                    summary.peer = message.from
                    client.send(RelayMessage(kind: .answer, id: "", to: message.from, payload: try payload(answer)))
                    negotiated = try OfferAnswer.negotiate(local: answer, remote: offer)
                case .message(let message) where message.kind == .answer:
                    negotiated = try OfferAnswer.negotiate(local: local, remote: try description(from: message.payload))
                case .closed(let reason):
                    throw NegotiationError("signaling closed: \(reason)")
                case .serverError(let code, let text):
                    log("signaling: \(code.rawValue): \(text)")
                default:
                    break
                }
            }
            if let negotiated { return negotiated }
        }
        return nil
    }

    /// Runs one round of media. The peer's bye ends it early, and so does a new offer (the peer
    /// came back before its silence was noticed; the offer stays queued for the next round).
    /// peer-left does not: it only says the peer's signaling connection dropped, and media may
    /// well go on (RTCP silence ends a round whose peer really vanished).
    private func runMedia(_ callMedia: CallMedia, _ call: NegotiatedCall, participant: String, peer: String, remaining: Duration?) throws -> (sent: SenderStatistics, received: ReceiverSummary) {
        let roundOver = Atomic<Bool>(false)
        startThread(named: "call-watcher") { [self] in
            while !roundOver.load(ordering: .relaxed) && !stopRequested.load(ordering: .relaxed) {
                if events.removeAll(where: { if case .message(let m) = $0 { return m.kind == .bye }; return false }) > 0
                    || events.contains(where: { if case .message(let m) = $0 { return m.kind == .offer }; return false }) {
                    callMedia.stop()
                    break
                }
                usleep(20_000)
            }
            if stopRequested.load(ordering: .relaxed) { callMedia.stop() }
        }
        current.withLock { $0.media = callMedia }
        // Every 100 ms: track subscriptions (first decoded video / audio); every second: status.
        startThread(named: "call-reporter") { [self] in
            var previous: (sent: SenderStatistics, received: ReceiverSummary)?
            var subscribed = (video: false, audio: false)
            var tick = 0
            while !roundOver.load(ordering: .relaxed) {
                usleep(100_000)
                tick += 1
                guard let now = callMedia.statistics() else { continue }
                if !subscribed.video && now.received.framesDecoded > 0 {
                    subscribed.video = true
                    onEvent?(.trackSubscribed(participant: peer, kind: .video))
                }
                if !subscribed.audio && now.received.audioDecoded > 0 {
                    subscribed.audio = true
                    onEvent?(.trackSubscribed(participant: peer, kind: .audio))
                }
                guard tick % 10 == 0 else { continue }
                let status = CallStatus.between(previous, now, participant: participant)
                current.withLock { $0.status = status }
                onStatus?(status)
                onEvent?(.stats(status))
                previous = now
            }
        }
        defer {
            roundOver.store(true, ordering: .relaxed)
            current.withLock { $0.media = nil }
        }
        var encoding = CallMedia.Encoding()
        encoding.mode = options.effectiveEncodingMode
        encoding.maxVideoBitrate = options.encodingParameters?.maxVideoBitrate ?? 2_500_000
        let log = self.log
        encoding.onDecision = { decision in log(decision.line) }
        return try callMedia.run(call, media: media, encoding: encoding, duration: remaining)
    }
}

extension UDPAddress {
    /// The local address the system would use to reach `host` (a UDP connect sends nothing).
    public static func localAddress(toward host: String, port: Int) throws -> String {
        let target = try UDPAddress(host: host, port: port)
        if target.host.hasPrefix("127.") { return "127.0.0.1" }
        let socket = try UDPSocket(bindHost: "0.0.0.0", port: 0)
        defer { socket.close() }
        return try socket.localAddress(connectingTo: target)
    }
}
