import Dispatch
import EndpointSignaling
import FoundationEssentials
import Glibc
import MediaCore
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
        // The viewers share one VP8 encode in temporal layers, VP8 first whenever the call may
        // use it; a player that takes only H.264 (the call's --video-codec auto or h264) is
        // answered in H.264 from an encoder of its own (CallMedia: the shared encoder is VP8's).
        watched.videoCodecs = media.videoCodecs.contains(.vp8) ? [.vp8] + media.videoCodecs.filter { $0 != .vp8 } : media.videoCodecs
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
        let inputs = BlockingQueue<Viewer.Input>(capacity: 1024)
        let callMedia: CallMedia
        do {
            callMedia = try CallMedia(media: media, ice: ice(), certificate: certificate, receives: false) { inputs.append(.transport($0)) }
        } catch {
            return refuse(name, "cannot make a transport: \(error)", status: 503, client: client)
        }
        callMedia.loopGroup = loops
        let viewer = Viewer(name: name, media: callMedia, inputs: inputs, log: log)
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
                (answer.transport.candidates, answer.transport.endOfCandidates) = viewer.gathered()
                _ = client.send(RelayMessage(kind: .answer, id: "", to: name, payload: .object(["type": .string("answer"), "sdp": .string(answer.sdp)])))
            } catch {
                return refuse(name, "cannot answer its offer: \(error)", status: 422, client: client)
            }
            // The shared encoder takes VP8 sessions only (CallMedia.run).
            let video = call.stream(.video).map { s in
                "video \(s.codec.name)" + (VideoPayloadFormat(encodingName: s.codec.name) == .vp8 ? " (the shared encoder)" : " (an encoder of its own)")
            } ?? "no video"
            log("whep: \(name) watches (\(count) of at most \(maxViewers) viewers), \(video)")
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

    /// One viewer: its media session, and what its watcher thread drives the viewer's
    /// `SessionController` with (the transport's events, the viewer's restarts).
    final class Viewer: @unchecked Sendable {  // the input queue is thread-safe and the watch flag atomic; the controller lives on the watcher thread
        enum Input: Sendable {
            case transport(BundleTransport.Event)
            /// An ICE restart the player asked for by PATCH (RFC 9725 §4.4), relayed by the service.
            case restart(ufrag: String, password: String, candidates: [String], client: SignalingClient)
            case wake
        }
        let name: String
        let media: CallMedia
        private let inputs: BlockingQueue<Input>
        private let log: @Sendable (LogMessage) -> Void
        private let watching = Atomic<Bool>(false)

        init(name: String, media: CallMedia, inputs: BlockingQueue<Input>, log: @escaping @Sendable (LogMessage) -> Void) {
            self.name = name
            self.media = media
            self.inputs = inputs
            self.log = log
        }

        /// The local candidates gathered within `gatheringWait`, and whether gathering finished
        /// (before the media runs: nothing else reads the inputs yet).
        func gathered() -> (candidates: [String], complete: Bool) {
            CallMedia.gather(for: ViewerHub.gatheringWait, stopped: { false }) { wait in
                inputs.take(timeout: wait).map { input in if case .transport(let event) = input { event } else { nil } }
            }
        }

        /// Drives the viewer's session while media runs (on a thread of its own): logs what the
        /// transport says and answers the player's restarts once their candidates are in.
        func watchEvents() {
            watching.store(true, ordering: .relaxed)
            startThread(named: "whep-events") { [self] in
                let clock = MonotonicClock()
                var controller = SessionController(.init(offerer: false, restarts: .answersOnly, gatheringWait: ViewerHub.gatheringWait,
                                                         peer: name, logPrefix: "whep: \(name): "))
                var client: SignalingClient?
                func perform(_ actions: [SessionController.Action]) {
                    for action in actions {
                        switch action {
                        case .log(let message): log(message)
                        case .answerRestartFragment(let ufrag, let password, let candidates):
                            do {
                                let mine = try media.transport.restartICE(controlling: false)
                                try media.acceptRestart(ufrag: ufrag, password: password, candidates: candidates)
                                perform(controller.handle(.restartBegan(ufrag: mine.ufrag, password: mine.password), at: clock.now))
                            } catch {
                                perform(controller.handle(.restartFailed("\(error)"), at: clock.now))
                                _ = client?.send(RelayMessage(kind: .bye, id: "", to: name, payload: .object(["reason": .string("the ICE restart failed: \(error)"), "status": .number(503)])))
                            }
                        case .sendRestartFragment(let fragment):
                            _ = client?.send(RelayMessage(kind: .answer, id: "", to: name, payload: .object(["type": .string("answer"), "sdp": .string(fragment.serialized)])))
                        case .trickle, .addRemoteCandidate, .restartICE, .answer, .accept, .reconnectSignaling, .end, .secured:
                            break  // the answer carried the candidates; a player's candidates and bye are taken where they arrive
                        }
                    }
                }
                while watching.load(ordering: .relaxed) {
                    // Until the next input, or the controller's next moment.
                    let now = clock.now
                    for input in inputs.take(timeout: controller.nextTick.map { $0 > now ? $0 - now : .zero }) {
                        switch input {
                        case .transport(let event): perform(controller.handle(.transport(event), at: clock.now))
                        case .restart(let ufrag, let password, let candidates, let from):
                            client = from
                            perform(controller.handle(.peerRestartFragment(ufrag: ufrag, password: password, candidates: candidates), at: clock.now))
                        case .wake: break
                        }
                    }
                    if let due = controller.nextTick, clock.now >= due { perform(controller.handle(.tick(addressesChanged: nil), at: clock.now)) }
                }
            }
        }

        func stopWatching() {
            watching.store(false, ordering: .relaxed)
            inputs.append(.wake)
        }

        /// An ICE restart the player asked for by PATCH: its new credentials and candidates.
        func restart(_ fields: [String: JSONValue], client: SignalingClient) {
            guard case .string(let ufrag)? = fields["ufrag"], case .string(let password)? = fields["pwd"] else { return }
            let candidates: [String] = if case .array(let list)? = fields["candidates"] { list.compactMap(\.stringValue) } else { [] }
            inputs.append(.restart(ufrag: ufrag, password: password, candidates: candidates, client: client))
        }
    }
}
