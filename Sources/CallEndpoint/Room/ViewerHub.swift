import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Signaling
import Synchronization

/// The WHEP players watching this endpoint (through `serve --http`'s /whep/ROOM), beside its
/// call. Each viewer is a media session of its own: its own transport (ICE, DTLS-SRTP), pacing,
/// retransmissions and estimate, fed from the one capture of the call's tracks; the video of
/// all viewers comes from one encoder with temporal layers (`VideoFanout`: a viewer on a thin
/// link is sent fewer layers), and their sound from one Opus encoder (`AudioFanout`). A viewer's offer comes through signaling from
/// the session's name ("whep~ID"); the answer goes back with the candidates gathered in its
/// first two seconds (a WHEP player takes no trickle from the server), and an ICE restart by
/// PATCH is answered the same way. A viewer ends on its bye (DELETE), or when the call ends.
final class ViewerHub: @unchecked Sendable {  // the viewers are behind a mutex; the rest is immutable
    let maxViewers: Int
    private let media: Call.Media
    private let certificate: DTLSCertificate
    private let ice: @Sendable () -> ICEAgent.Configuration
    private let encoding: CallMedia.Encoding
    /// The one encoder every viewer's video comes from, and the one for their sound.
    let fanout: VideoFanout?
    let audioFanout: AudioFanout?
    private let log: @Sendable (LogMessage) -> Void
    private let viewers = Mutex<[String: Viewer]>([:])
    /// One thread runs every viewer's media loop: a frame of the shared encoders wakes it once,
    /// not once per viewer.
    private let loops = MediaLoopGroup(threadName: "viewer-loops")
    private let closed = Atomic<Bool>(false)
    /// How long a viewer's answer waits for candidates.
    static let gatheringWait: Duration = .seconds(2)

    init(maxViewers: Int, media: Call.Media, certificate: DTLSCertificate, encoding: CallMedia.Encoding,
         ice: @escaping @Sendable () -> ICEAgent.Configuration, log: @escaping @Sendable (LogMessage) -> Void) {
        self.maxViewers = maxViewers
        // Viewers watch; the call's data channels and its recording are the call's peer's alone.
        var watched = media
        watched.dataTrack = nil
        watched.recording = nil
        self.media = watched
        self.certificate = certificate
        var shared = encoding
        // Manual encoding sends at the rate a call's sender would (1 Mbit/s under the ceiling).
        fanout = media.videoTrack.map {
            VideoFanout(track: $0, maxVideoBitrate: encoding.maxVideoBitrate,
                        fixedBitrate: encoding.mode == .manual ? MediaSenderConfiguration(destinationHost: "", videoPort: 0).videoBitrate : nil,
                        log: { line in log("whep: \(line)") })
        }
        shared.fanout = fanout
        audioFanout = media.audioTrack.map { AudioFanout(track: $0) }
        shared.audioFanout = audioFanout
        self.encoding = shared
        self.ice = ice
        self.log = log
    }

    /// Whether a signaling message is a viewer's (and so this hub's, not the call's).
    static func isViewer(_ message: RelayMessage) -> Bool { message.from?.hasPrefix("whep~") == true }

    var count: Int { viewers.withLock { $0.count } }

    /// A viewer's message: an offer (a new viewer, or an ICE restart), a candidate, a bye.
    func handle(_ message: RelayMessage, client: SignalingClient) {
        guard let name = message.from else { return }
        let viewer = viewers.withLock { $0[name] }
        switch message.kind {
        case .offer:
            if let viewer {
                if case .object(let restart)? = message.payload["iceRestart"] { viewer.restart(restart, client: client) }
                return
            }
            start(name, offer: message.payload, client: client)
        case .candidate:
            guard let viewer, let candidate = Call.candidate(message.payload) else { return }
            if candidate.line.isEmpty {
                viewer.media.transport.remoteGatheringDone(ufrag: candidate.ufrag)
            } else {
                try? viewer.media.transport.addRemoteCandidate(candidate.line, ufrag: candidate.ufrag)
            }
        case .bye:
            viewer?.media.stop()
        case .answer:
            break
        }
    }

    private func refuse(_ name: String, _ reason: String, status: Int, client: SignalingClient) {
        log(.warning("whep: refused \(name): \(reason)"))
        _ = client.send(RelayMessage(kind: .bye, id: "", to: name, payload: .object(["reason": .string(reason), "status": .number(Double(status))])))
    }

    private func start(_ name: String, offer payload: JSONValue, client: SignalingClient) {
        guard !closed.load(ordering: .relaxed) else { return refuse(name, "the endpoint is leaving", status: 503, client: client) }
        guard maxViewers > 0 else { return refuse(name, "this endpoint takes no viewers (--max-viewers 0)", status: 403, client: client) }
        let offer: JSEPDescription
        do { offer = try Call.description(payload, as: .offer) } catch { return refuse(name, error.description, status: 422, client: client) }
        let events = BlockingQueue<BundleTransport.Event?>(capacity: 1024)
        let callMedia: CallMedia
        do {
            callMedia = try CallMedia(media: media, ice: ice(), certificate: certificate, receives: false) { events.append($0) }
        } catch {
            return refuse(name, "cannot make a transport: \(error)", status: 503, client: client)
        }
        callMedia.loopGroup = loops
        let viewer = Viewer(name: name, media: callMedia, events: events, log: log)
        let taken = viewers.withLock { v -> Bool in
            guard v.count < maxViewers else { return false }
            v[name] = viewer
            return true
        }
        guard taken else {
            callMedia.transport.close()
            return refuse(name, "this endpoint has its \(maxViewers) viewers (--max-viewers)", status: 503, client: client)
        }
        var encoding = self.encoding
        // What its session decides (its layers, its share of its estimate) is logged with its name.
        encoding.onDecision = { [log] decision in log("whep: \(name): \(decision.line)") }
        startThread(named: "whep-viewer") { [self, encoding] in
            defer {
                callMedia.transport.close()
                viewers.withLock { $0[name] = nil }
            }
            let call: NegotiatedCall
            do {
                var answer: JSEPDescription
                (answer, call) = try callMedia.answer(offer)
                (answer.transport.candidates, answer.transport.endOfCandidates) = viewer.gathered(ufrag: callMedia.localTransport.ufrag)
                _ = client.send(RelayMessage(kind: .answer, id: "", to: name, payload: .object(["type": .string("answer"), "sdp": .string(answer.sdp)])))
            } catch {
                return refuse(name, "cannot answer its offer: \(error)", status: 422, client: client)
            }
            log("whep: \(name) watches (\(count) of at most \(maxViewers) viewers)")
            viewer.watchEvents()
            let outcome = Result { try callMedia.run(call, media: media, encoding: encoding, duration: nil) }
            switch outcome {
            case .success(let result):
                log("whep: \(name) done: sent \(result.sent.videoFrames) frames, \(result.sent.audioPackets) audio packets")
            case .failure(let error):
                log(.warning("whep: \(name): \(error)"))
            }
            viewer.stopWatching()
            if !closed.load(ordering: .relaxed) || viewer.media.transport.selectedPair != nil {
                _ = client.send(RelayMessage(kind: .bye, id: "", to: name, payload: .object(["reason": .string("the viewer's session ended")])))
            }
        }
    }

    /// The call ends: every viewer ends with it, and hears so.
    func stopAll(client: SignalingClient) {
        closed.store(true, ordering: .relaxed)
        let all = viewers.withLock { Array($0.values) }
        for viewer in all {
            viewer.media.stop()
            _ = client.send(RelayMessage(kind: .bye, id: "", to: viewer.name, payload: .object(["reason": .string("the endpoint left")])))
        }
        fanout?.stop()
        audioFanout?.stop()
    }

    /// One viewer: its media session and the transport's events.
    final class Viewer: @unchecked Sendable {  // the event queue is thread-safe; the restart state is behind a mutex, the watch flag atomic
        let name: String
        let media: CallMedia
        private let events: BlockingQueue<BundleTransport.Event?>
        private let log: @Sendable (LogMessage) -> Void
        private let watching = Atomic<Bool>(false)
        /// A restart whose answer waits for its candidates, and the local candidates seen by
        /// agent (a restart's agent may gather before the restart is recorded here).
        private struct Restarts {
            var pending: (ufrag: String, password: String, until: ContinuousClock.Instant, client: SignalingClient)?
            var local: [String: (candidates: [String], complete: Bool)] = [:]
        }
        private let restarts = Mutex(Restarts())

        init(name: String, media: CallMedia, events: BlockingQueue<BundleTransport.Event?>, log: @escaping @Sendable (LogMessage) -> Void) {
            self.name = name
            self.media = media
            self.events = events
            self.log = log
        }

        /// The local candidates of the agent with `ufrag`, gathered within `gatheringWait`, and
        /// whether gathering finished (before the media runs: nothing else reads the events yet).
        func gathered(ufrag: String) -> (candidates: [String], complete: Bool) {
            var candidates: [String] = []
            let until = ContinuousClock.now + ViewerHub.gatheringWait
            while ContinuousClock.now < until {
                for event in events.take(timeout: until - ContinuousClock.now) {
                    switch event {
                    case nil: break
                    case .localCandidate(let line, let u) where u == ufrag: candidates.append(line)
                    case .gatheringDone(let u) where u == ufrag: return (candidates, true)
                    default: break
                    }
                }
            }
            return (candidates, false)
        }

        /// Logs what the transport says while media runs, and answers restarts once their
        /// candidates are in (on a thread of its own).
        func watchEvents() {
            watching.store(true, ordering: .relaxed)
            startThread(named: "whep-events") { [self] in
                while watching.load(ordering: .relaxed) {
                    let until = restarts.withLock { $0.pending?.until }
                    let wait = until.map { max(.milliseconds(1), min(.milliseconds(200), $0 - ContinuousClock.now)) } ?? .milliseconds(200)
                    for event in events.take(timeout: wait) {
                        switch event {
                        case nil: break
                        case .localCandidate(let line, let ufrag): restarts.withLock { $0.local[ufrag, default: ([], false)].candidates.append(line) }
                        case .gatheringDone(let ufrag): restarts.withLock { $0.local[ufrag, default: ([], false)].complete = true }
                        case .selectedPair(let pair): log("whep: \(name): ice: \(pair)")
                        case .secured(let profile): log("whep: \(name): dtls: connected, SRTP \(profile.rawValue)")
                        case .pathLost: log(.warning("whep: \(name): consent expired: sending paused"))
                        case .restarted: log("whep: \(name): ICE restart done")
                        case .failed(let why), .untrusted(let why): log(.warning("whep: \(name): \(why)"))
                        default: break
                        }
                    }
                    answerRestartIfReady()
                }
            }
        }

        /// Sends the pending restart's answer once its agent finished gathering or its wait is over.
        private func answerRestartIfReady() {
            let ready = restarts.withLock { r -> (ICEFragment, SignalingClient)? in
                guard let p = r.pending else { return nil }
                let local = r.local[p.ufrag] ?? ([], false)
                guard local.complete || ContinuousClock.now >= p.until else { return nil }
                r.pending = nil
                return (ICEFragment(ufrag: p.ufrag, password: p.password, candidates: local.candidates, endOfCandidates: local.complete), p.client)
            }
            guard let (fragment, client) = ready else { return }
            _ = client.send(RelayMessage(kind: .answer, id: "", to: name, payload: .object(["type": .string("answer"), "sdp": .string(fragment.serialized)])))
            log("whep: \(name): ICE restart answered with \(fragment.candidates.count) candidates")
        }

        func stopWatching() {
            watching.store(false, ordering: .relaxed)
            events.append(nil)
        }

        /// An ICE restart the player asked for by PATCH: a new agent answers its new credentials
        /// and candidates; the answer, with ours, goes once they are gathered (RFC 9725 §4.4).
        func restart(_ fields: [String: JSONValue], client: SignalingClient) {
            guard case .string(let ufrag)? = fields["ufrag"], case .string(let password)? = fields["pwd"] else { return }
            let candidates: [String] = if case .array(let list)? = fields["candidates"] { list.compactMap(\.stringValue) } else { [] }
            do {
                let mine = try media.transport.restartICE(controlling: false)
                try media.acceptRestart(ufrag: ufrag, password: password, candidates: candidates)
                restarts.withLock { $0.pending = (mine.ufrag, mine.password, .now + ViewerHub.gatheringWait, client) }
                log("whep: \(name): restarts ICE by PATCH with \(candidates.count) candidates of its own")
                events.append(nil)  // wakes the watcher to time the answer
            } catch {
                log(.warning("whep: \(name): cannot restart ICE: \(error)"))
                _ = client.send(RelayMessage(kind: .bye, id: "", to: name, payload: .object(["reason": .string("the ICE restart failed: \(error)"), "status": .number(503)])))
            }
        }
    }
}
