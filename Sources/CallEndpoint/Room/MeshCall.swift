import EndpointSignaling
import MediaCore
import Dispatch
import FoundationEssentials
import Platform
import RTPTransport
import Signaling
import Synchronization
import ICEServers

/// What a mesh participant got from each other participant over the call.
public struct MeshSummary: Sendable {
    public struct Peer: Sendable {
        /// Media sessions with that peer (more than one when it left and came back).
        public var sessions = 0
        public var framesDecoded = 0
        /// Time from each session's first decoded frame to its end, summed.
        public var watched: Duration = .zero
        public var decodeErrors = 0
        public var freezes = 0
        public var longestFreeze: Duration = .zero
        public var videoPackets = 0
        public var videoPacketsLost: Int64 = 0
        public var audioDecoded = 0
        public var framesSent = 0
    }
    public var participant = ""
    public var peers: [String: Peer] = [:]
    public var endReason = ""
}

/// A room of up to four in callend's own rooms (`serve --max-participants 4`): a full mesh, one
/// media session with each other participant, all sent from one capture through one video
/// encoder with temporal layers and one Opus encoder (`VideoFanout`, `AudioFanout`: each peer's
/// session keeps its own ICE, DTLS-SRTP, pacing, retransmissions and estimate, and is sent the
/// layers that fit it), and each peer's media received and decoded on its own.
///
/// The newcomer offers to everyone already there (the `joined` list); those present answer
/// (`peer-joined` only announces). The descriptions carry the candidates gathered in their first
/// two seconds; later ones go by trickle. A peer's `peer-left` or `bye` ends that session only;
/// a peer that comes back as a new session offers again and gets a new one. Runs on the
/// calling thread until the duration passes or `stop()`.
public final class MeshCall: @unchecked Sendable {  // the links are used on the run thread only; the summary is behind a mutex
    /// Peers at most: a mesh of four.
    public static let maxPeers = 3
    public let options: ConnectOptions
    public let server: (host: String, port: Int)
    public let media: Call.Media
    public let duration: Duration?
    private let log: @Sendable (LogMessage) -> Void
    private let certificate: DTLSCertificate
    private let signalingTLS: TLSContext?
    private let stopRequested = Atomic<Bool>(false)
    private let queue = BlockingQueue<MeshEvent?>()
    private let results = Mutex(MeshSummary())
    private let serviceICEServers = Mutex<[ICEServer]>([])
    private static let gatheringWait: Duration = .seconds(2)
    private static let answerWait: Duration = .seconds(15)

    enum MeshEvent: Sendable {
        case signaling(SignalingEvent)
        case linkEnded(id: Int, peer: String)
    }

    public init(options: ConnectOptions, server: (host: String, port: Int), media: Call.Media, duration: Duration?,
                log: @escaping @Sendable (LogMessage) -> Void = { _ in }) throws {
        self.options = options
        self.server = server
        signalingTLS = try Call.signalingTLS(options, server: server)
        // The peers' media is decoded and counted; a recording, data channels, renderers and a
        // speaker are a two-party call's.
        var sent = media
        sent.recording = nil
        sent.dataTrack = nil
        sent.renderers = []
        sent.audioPlayout = nil
        // One encode in VP8 temporal layers feeds every peer.
        sent.videoCodecs = [.vp8]
        self.media = sent
        self.duration = duration
        self.log = log
        certificate = try DTLSCertificate()
    }

    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        _ = queue.append(nil)
    }

    private var stopped: Bool { stopRequested.load(ordering: .relaxed) }

    private func iceConfiguration(controlling: Bool) -> ICEAgent.Configuration {
        Call.iceConfiguration(controlling: controlling, serviceServers: serviceICEServers.withLock { $0 }, options: options)
    }

    public func run() throws -> MeshSummary {
        let deadline = duration.map { MediaTime.now + $0 }
        let token = options.token
        var configuration = SignalingClientConfiguration(host: server.host, port: server.port, room: options.roomName, token: { token }, tls: signalingTLS)
        configuration.alternates = options.fallbackServers
        configuration.eventHandler = { [queue] event in _ = queue.append(.signaling(event)) }
        let client = SignalingClient(configuration: configuration)
        client.start()
        var encoding = CallMedia.Encoding()
        encoding.mode = options.effectiveEncodingMode
        encoding.maxVideoBitrate = options.encodingParameters?.maxVideoBitrate ?? 2_500_000
        encoding.controlsCameraMode = false
        let log = self.log
        let fanout = media.videoTrack.map {
            VideoFanout(track: $0, maxVideoBitrate: encoding.maxVideoBitrate,
                        fixedBitrate: encoding.mode == .manual ? MediaSenderConfiguration(destinationHost: "", videoPort: 0).videoBitrate : nil,
                        log: { line in log("mesh: \(line)") })
        }
        let audioFanout = media.audioTrack.map { AudioFanout(track: $0) }
        encoding.fanout = fanout
        encoding.audioFanout = audioFanout
        var links: [String: Link] = [:]
        var nextID = 0
        var me = ""
        /// Ends every session (each records what it got) and says bye to its peer.
        func endAll() {
            for link in links.values { link.stop() }
            for (peer, link) in links {
                link.waitEnded(timeout: .seconds(5))
                _ = client.send(RelayMessage(kind: .bye, id: "", to: peer))
            }
            links.removeAll()
            fanout?.stop()
            audioFanout?.stop()
        }
        defer {
            endAll()
            client.stop()
            media.close()
        }
        func start(_ peer: String, offer: JSEPDescription?) {
            nextID += 1
            var linkEncoding = encoding
            linkEncoding.onDecision = { decision in log("mesh: \(peer): \(decision.line)") }
            do {
                let link = try Link(id: nextID, peer: peer, offer: offer, mesh: self, client: client, encoding: linkEncoding,
                                    remaining: deadline.map { $0 - MediaTime.now })
                links[peer] = link
            } catch {
                log(.warning("mesh: \(peer): cannot start a session: \(error)"))
            }
        }
        while !stopped && (deadline.map { MediaTime.now < $0 } ?? true) {
            let wait = deadline.map { min($0 - MediaTime.now, .seconds(1)) } ?? .seconds(1)
            for event in queue.take(timeout: max(wait, .milliseconds(1))) {
                guard let event else { continue }
                switch event {
                case .linkEnded(let id, let peer):
                    if links[peer]?.id == id { links[peer] = nil }
                case .signaling(.iceServers(let list)):
                    serviceICEServers.withLock { $0 = Call.iceServers(list) }
                case .signaling(.joined(let participant, let peers, let rejoined)):
                    me = participant
                    results.withLock { $0.participant = participant }
                    if rejoined {
                        log("signaling: joined room \(options.roomName) again")
                        continue
                    }
                    let others = peers.filter { !Call.isWHIPPublisher($0) && !$0.hasPrefix("whep~") }
                    log("signaling: joined room \(options.roomName) as \(participant); \(others.isEmpty ? "nobody else yet" : "offering to " + others.joined(separator: ", "))")
                    for peer in others.prefix(Self.maxPeers) where links[peer] == nil { start(peer, offer: nil) }
                case .signaling(.peerJoined(let peer, _)):
                    log("mesh: \(peer) joined")
                case .signaling(.peerLeft(let peer, let reason)):
                    if let link = links[peer] {
                        log("mesh: \(peer) left (\(reason))")
                        link.stop()
                    }
                case .signaling(.message(let message)):
                    guard let peer = message.from, peer != me else { continue }
                    switch message.kind {
                    case .offer:
                        let offer: JSEPDescription
                        do { offer = try Call.description(message.payload, as: .offer) } catch {
                            Call.refuse(peer, "its offer: \(error)", status: 422, client: client, log: log)
                            continue
                        }
                        if let link = links[peer] {
                            // The peer came back as a new session: the old one ends, a new one starts.
                            log("mesh: \(peer) offers a new session")
                            link.stop()
                            links[peer] = nil
                        }
                        guard links.count < Self.maxPeers else {
                            log(.warning("mesh: refused \(peer): a mesh holds \(Self.maxPeers + 1)"))
                            _ = client.send(RelayMessage(kind: .bye, id: "", to: peer, payload: .object(["reason": .string("the mesh is full")])))
                            continue
                        }
                        start(peer, offer: offer)
                    case .answer:
                        links[peer]?.answered(message.payload)
                    case .candidate:
                        if let link = links[peer], let candidate = Call.candidate(message.payload) { link.addRemote(candidate) }
                    case .bye:
                        if let link = links[peer] {
                            log("mesh: \(peer) said bye")
                            link.stop()
                        }
                    }
                case .signaling(.closed(let reason)):
                    results.withLock { $0.endReason = "signaling closed: \(reason)" }
                    stopRequested.store(true, ordering: .relaxed)
                case .signaling(.serverError(let code, let text)):
                    log(.warning("signaling: \(code.rawValue): \(text)"))
                    if code == .roomFull {
                        results.withLock { $0.endReason = "the room is full: \(text)" }
                        stopRequested.store(true, ordering: .relaxed)
                    }
                case .signaling(.reconnecting(let attempt, let delay, let reason)):
                    log(.warning("signaling: \(reason); reconnecting in \(delay.inSeconds.fixed(1)) s (attempt \(attempt))"))
                case .signaling:
                    break
                }
            }
        }
        endAll()
        return results.withLock { s in
            if s.endReason.isEmpty { s.endReason = stopped ? "stopped" : "done" }
            return s
        }
    }

    /// What one session with a peer delivered, added to the summary.
    fileprivate func record(_ peer: String, sent: SenderStatistics, received r: ReceiverSummary) {
        results.withLock {
            var p = $0.peers[peer] ?? MeshSummary.Peer()
            p.sessions += 1
            p.framesDecoded += r.framesDecoded
            if let first = r.firstFrameAt { p.watched += r.elapsed - first }
            p.decodeErrors += r.decodeErrors
            p.freezes += r.freezes
            p.longestFreeze = max(p.longestFreeze, r.longestFreeze)
            p.videoPackets += r.videoPackets
            p.videoPacketsLost += r.videoPacketsLost
            p.audioDecoded += r.audioDecoded
            p.framesSent += sent.videoFrames
            $0.peers[peer] = p
        }
    }

    /// One media session with one peer, on a thread of its own: offers (or answers its offer),
    /// then sends from the shared encoders and receives until it is stopped or the call ends.
    final class Link: @unchecked Sendable {  // the queues and the media are thread-safe; the rest is immutable
        let id: Int
        let peer: String
        let media: CallMedia
        private let events = BlockingQueue<BundleTransport.Event?>(capacity: 4096)
        private let answers = BlockingQueue<JSONValue?>()
        private let ended = DispatchSemaphore(value: 0)
        private let over = Atomic<Bool>(false)
        /// Candidates that came before our description went (the peer's, trickled early).
        private let early = Mutex<[(line: String, ufrag: String?)]>([])

        init(id: Int, peer: String, offer: JSEPDescription?, mesh: MeshCall, client: SignalingClient, encoding: CallMedia.Encoding, remaining: Duration?) throws {
            self.id = id
            self.peer = peer
            let events = self.events
            media = try CallMedia(media: mesh.media, ice: mesh.iceConfiguration(controlling: offer == nil), certificate: mesh.certificate) { _ = events.append($0) }
            startThread(named: "mesh-peer") { [self] in
                defer {
                    media.transport.close()
                    ended.signal()
                    _ = mesh.queue.append(.linkEnded(id: id, peer: peer))
                }
                do {
                    try run(offer: offer, mesh: mesh, client: client, encoding: encoding, remaining: remaining)
                } catch {
                    // This peer's session ends, and the peer hears why; the mesh's others go on.
                    if !over.load(ordering: .relaxed) {
                        Call.refuse(peer, "mesh: \(error)", status: error is CallSecurityError ? 403 : 422, client: client, log: mesh.log)
                    }
                }
            }
        }

        private func run(offer: JSEPDescription?, mesh: MeshCall, client: SignalingClient, encoding: CallMedia.Encoding, remaining: Duration?) throws {
            let started = MediaTime.now
            let log = mesh.log
            let call: NegotiatedCall
            func gathered() -> (candidates: [String], complete: Bool) {
                CallMedia.gather(for: MeshCall.gatheringWait, stopped: { over.load(ordering: .relaxed) }) { events.take(timeout: $0) }
            }
            func send(_ description: JSEPDescription) {
                let type = description.type == .offer ? "offer" : "answer"
                _ = client.send(RelayMessage(kind: description.type == .offer ? .offer : .answer, id: "", to: peer,
                                             payload: .object(["type": .string(type), "sdp": .string(description.sdp)])))
            }
            if let offer {
                var answer: JSEPDescription
                (answer, call) = try media.answer(offer)
                (answer.transport.candidates, answer.transport.endOfCandidates) = gathered()
                send(answer)
            } else {
                var mine = media.offer()
                (mine.transport.candidates, mine.transport.endOfCandidates) = gathered()
                send(mine)
                log("mesh: offered to \(peer)")
                let until = MediaTime.now + MeshCall.answerWait
                var answer: JSEPDescription?
                while answer == nil && !over.load(ordering: .relaxed) && MediaTime.now < until {
                    for payload in answers.take(timeout: until - .now) {
                        guard let payload else { continue }
                        answer = try Call.description(payload, as: .answer)
                    }
                }
                guard let answer else {
                    if over.load(ordering: .relaxed) { return }
                    throw NegotiationError("no answer within \(MeshCall.answerWait)")
                }
                call = try media.accept(answer, to: mine)
            }
            for candidate in early.withLock({ c in defer { c.removeAll() }; return c }) { addRemote(candidate) }
            if over.load(ordering: .relaxed) { return }
            log("mesh: \(peer): media \(call.streams.map { "\($0.kind.rawValue) \($0.codec.name)" }.joined(separator: ", ")) over ICE + DTLS-SRTP")
            let watcher = SessionWatcher(.init(offerer: offer == nil, restarts: .answersOnly, gatheringWait: MeshCall.gatheringWait, peer: peer, logPrefix: "mesh: \(peer): "),
                                         thread: "mesh-events", events: events, log: log) { [peer] action in
                guard case .trickle(let line, let ufrag) = action else { return }
                _ = client.send(RelayMessage(kind: .candidate, id: "", to: peer, payload: .object(["candidate": .string(line), "usernameFragment": .string(ufrag)])))
            }
            defer { watcher.stop() }
            let (sent, received) = try media.run(call, media: mesh.media, encoding: encoding, duration: remaining.map { $0 - (MediaTime.now - started) })
            mesh.record(peer, sent: sent, received: received)
            let watched = received.firstFrameAt.map { received.elapsed - $0 } ?? .zero
            log("mesh: \(peer): session over: decoded \(received.framesDecoded) frames in \(Int(watched.inMilliseconds)) ms, sent \(sent.videoFrames)")
        }

        func answered(_ payload: JSONValue) { _ = answers.append(payload) }

        func addRemote(_ candidate: (line: String, ufrag: String?)) {
            do {
                if candidate.line.isEmpty {
                    media.transport.remoteGatheringDone(ufrag: candidate.ufrag)
                } else {
                    try media.transport.addRemoteCandidate(candidate.line, ufrag: candidate.ufrag)
                }
            } catch {
                // Before our description set the peer's side up: kept for after.
                early.withLock { $0.append(candidate) }
            }
        }

        func stop() {
            over.store(true, ordering: .relaxed)
            _ = answers.append(nil)
            _ = events.append(nil)
            media.stop()
        }

        func waitEnded(timeout: Duration) { ended.wait(for: timeout) }
    }
}
