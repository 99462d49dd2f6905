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

/// What a publication did, for the summary line.
public struct PublishSummary: Sendable {
    /// From the first POST to its 201.
    public var answeredIn: Duration?
    /// From the first POST until DTLS keyed SRTP (media could flow).
    public var connectedIn: Duration?
    /// Sessions made (more than one when the path was lost and the publication was POSTed again).
    public var sessions = 0
    public var iceRestarts = 0
    public var sent: SenderStatistics?
    public var deleted = false
    public var endReason = ""
}

/// Publishes a camera and a microphone to a WHIP server (RFC 9725): gathers, POSTs the offer with
/// its candidates (sendonly audio and video, bundled), takes the answer, and sends until the
/// duration passes or `stop()`; then DELETEs the session. Candidates found after the POST go by
/// PATCH. A path that is lost is restarted by PATCH (`If-Match: "*"`); a server that takes no
/// PATCH, or a restart that does not bring the path back, gets a new POST (and the old session a
/// DELETE). Runs on the calling thread.
public final class WHIPPublisher: @unchecked Sendable {  // the event queue and the stop flag are thread-safe; everything else is used on the run thread
    public struct Options: Sendable {
        public var endpoint: HTTPURL
        public var bearerToken: String?
        /// PEM CAs for an https endpoint (nil: the system's).
        public var caFile: String?
        /// This publisher's own STUN/TURN servers, beside those the server's Link fields give.
        public var iceServers: [ICEServer] = []
        public var iceTransportPolicy: ICETransportPolicy = .all
        public var encodingMode: VideoEncodingMode = .auto
        public var maxVideoBitrate = 2_500_000
        /// How long to gather before the POST (candidates after it are trickled by PATCH).
        public var gatheringWait: Duration = .seconds(2)
        /// New POSTs after a lost path, before giving up.
        public var maxSessions = 5

        public init(endpoint: HTTPURL) { self.endpoint = endpoint }
    }

    public let options: Options
    public let media: Call.Media
    public let duration: Duration?
    private let log: @Sendable (LogMessage) -> Void
    private let certificate: DTLSCertificate
    private let whip: WHIPClient
    private let stopRequested = Atomic<Bool>(false)
    /// The transports' events, by session; a nil event only wakes the waiting thread.
    private let events = BlockingQueue<(session: Int, event: BundleTransport.Event?)>(capacity: 4096)
    /// The media of the session running now, to stop it.
    private let running = Mutex<CallMedia?>(nil)

    public init(options: Options, media: Call.Media, duration: Duration?, log: @escaping @Sendable (LogMessage) -> Void = { _ in }) throws {
        self.options = options
        self.media = media
        self.duration = duration
        self.log = log
        certificate = try DTLSCertificate()
        whip = WHIPClient(endpoint: options.endpoint, bearerToken: options.bearerToken, http: try HTTPClient(caFile: options.caFile))
    }

    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        events.append((0, nil))
        running.withLock { $0 }?.stop()
    }

    private var stopped: Bool { stopRequested.load(ordering: .relaxed) }

    /// Publishes until the duration passes or `stop()`; throws when the server refuses the
    /// publication or no path to it comes up.
    public func run() throws -> PublishSummary {
        let start = MediaTime.now
        let deadline = duration.map { start + $0 }
        var summary = PublishSummary()
        defer { media.close() }
        var linkServers: [ICEServer] = []
        var repostFailures = 0
        while !stopped && (deadline.map { MediaTime.now < $0 } ?? true) {
            summary.sessions += 1
            let session = summary.sessions
            let made = try CallMedia(media: media, ice: iceConfiguration(servers: linkServers), certificate: certificate, receives: false) { [events] event in
                events.append((session, event))
            }
            defer { made.transport.close() }
            // Candidates gathered before the POST go in the offer (most WHIP servers take no trickle).
            let (gathered, complete) = CallMedia.gather(for: options.gatheringWait, stopped: { stopped }) { wait in
                events.take(timeout: wait).filter { $0.session == session }.map(\.event)
            }
            if stopped { break }
            var offer = made.offer()
            offer.transport.candidates = gathered
            offer.transport.endOfCandidates = complete
            log("whip: POST \(options.endpoint) (\(gathered.count) candidates\(complete ? "" : ", more to trickle"))")
            let posted = MediaTime.now
            let posting = Result { () throws(WHIPError) in try whip.post(offer: offer.sdp) }
            if case .failure(let error) = posting {
                // Publishing again after a lost path, with the network still gone: again, until it
                // is back (the first POST's failure is the caller's to hear).
                guard error.status == nil && summary.sessions > 1 else { throw error }
                summary.sessions -= 1
                let wait = Duration.seconds(1 << min(repostFailures, 3))
                repostFailures += 1
                log(.warning("whip: \(error); publishing again in \(wait)"))
                _ = events.take(timeout: wait)
                continue
            }
            guard case .success(var resource) = posting else { continue }
            repostFailures = 0
            if summary.answeredIn == nil { summary.answeredIn = MediaTime.now - posted }
            let servers = resource.iceServers.isEmpty ? "" : ", ICE servers " + resource.iceServers.flatMap(\.urls).joined(separator: " ")
            log("whip: 201 in \(Int((MediaTime.now - posted).inMilliseconds)) ms, session \(resource.location)\(servers)")
            linkServers = Call.iceServers(resource.iceServers)
            let answer: JSEPDescription
            do { answer = try JSEPDescription(type: .answer, sdp: resource.answer) } catch {
                try? whip.delete(resource)
                throw NegotiationError("the WHIP server's answer is not a usable SDP answer: \(error)")
            }
            let call: NegotiatedCall
            do { call = try made.accept(answer, to: offer) } catch {
                try? whip.delete(resource)
                throw error
            }
            let streams = call.streams.map { "\($0.kind.rawValue) \($0.codec.name) \(JSEPDescription.Direction(sends: $0.sends, receives: $0.receives).rawValue)" }
            log("media: \(streams.joined(separator: ", ")) over ICE + DTLS-SRTP (BUNDLE)")
            running.withLock { $0 = made }
            let watcher = Watcher(publisher: self, media: made, session: session, trickle: !complete, linkServers: linkServers)
            watcher.start(resource: resource)
            var encoding = CallMedia.Encoding()
            encoding.mode = options.encodingMode
            encoding.maxVideoBitrate = options.maxVideoBitrate
            let log = self.log
            encoding.onDecision = { decision in log("\(decision.line)") }
            let result: Result<(sent: SenderStatistics, received: ReceiverSummary), any Error> = Result {
                try made.run(call, media: media, encoding: encoding, duration: deadline.map { $0 - MediaTime.now })
            }
            running.withLock { $0 = nil }
            let watched = watcher.finish()
            resource = watched.resource
            summary.iceRestarts += watched.restarts
            if summary.connectedIn == nil, let secured = watched.securedAt { summary.connectedIn = secured - posted }
            deleteSession(resource, summary: &summary)
            switch result {
            case .success(let sent):
                summary.sent = sent.sent
                if watched.repost && !stopped && summary.sessions < options.maxSessions {
                    log(.warning("whip: \(watched.reason): publishing again with a new POST"))
                    continue
                }
                summary.endReason = watched.repost ? watched.reason : stopped ? "stopped" : "done"
            case .failure(let error):
                summary.endReason = "\(error)"
                throw error
            }
            break
        }
        if summary.endReason.isEmpty { summary.endReason = stopped ? "stopped" : "done" }
        return summary
    }

    private func deleteSession(_ resource: WHIPResource, summary: inout PublishSummary) {
        do {
            try whip.delete(resource)
            summary.deleted = true
            log("whip: DELETE \(resource.location): session ended")
        } catch {
            log(.warning("whip: \(error)"))
        }
    }

    private func iceConfiguration(servers: [ICEServer]) -> ICEAgent.Configuration {
        var ice = ICEAgent.Configuration(controlling: true)
        ice.servers = servers + options.iceServers
        ice.relayOnly = options.iceTransportPolicy == .relay
        return ice
    }

    /// Watches one session while its media runs: trickles late candidates, restarts a lost path
    /// by PATCH, and asks for a new POST when that cannot work. On its own thread.
    private final class Watcher: @unchecked Sendable {  // the outcome is behind a mutex; the rest is used on the watcher thread only
        struct Outcome {
            var resource: WHIPResource?
            var restarts = 0
            var repost = false
            var reason = ""
            var securedAt: MediaTime?
        }
        let publisher: WHIPPublisher
        let media: CallMedia
        let session: Int
        var trickle: Bool
        let linkServers: [ICEServer]
        let over = Atomic<Bool>(false)
        let outcome = Mutex(Outcome())
        let done = DispatchSemaphore(value: 0)

        init(publisher: WHIPPublisher, media: CallMedia, session: Int, trickle: Bool, linkServers: [ICEServer]) {
            self.publisher = publisher
            self.media = media
            self.session = session
            self.trickle = trickle
            self.linkServers = linkServers
        }

        func start(resource: WHIPResource) {
            outcome.withLock { $0.resource = resource }
            startThread(named: "whip-watcher") { [self] in
                run(resource)
                done.signal()
            }
        }

        /// Ends the watch and returns what it did.
        func finish() -> (resource: WHIPResource, restarts: Int, repost: Bool, reason: String, securedAt: MediaTime?) {
            over.store(true, ordering: .relaxed)
            publisher.events.append((session, nil))
            done.wait()
            let o = outcome.withLock { $0 }
            return (o.resource!, o.restarts, o.repost, o.reason, o.securedAt)
        }

        private func repost(_ reason: String) {
            outcome.withLock { ($0.repost, $0.reason) = (true, reason) }
            media.stop()
        }

        private func run(_ initial: WHIPResource) {
            var resource = initial
            let whip = publisher.whip, log = publisher.log
            let clock = MonotonicClock()
            var controller = SessionController(.init(offerer: true, restarts: .fragmentsToServer(maxTries: 2), gatheringWait: .seconds(3), peer: "the WHIP server"))
            var addresses = LocalAddressWatch()
            /// The server's answer to a PATCH: the fragment it sent back (nil when it sent none), or
            /// nil when the PATCH failed (what follows from that is done here).
            func patch(_ fragment: ICEFragment, restart: Bool) -> ICEFragment?? {
                do {
                    let answer = try whip.patch(&resource, fragment: fragment, restart: restart)
                    outcome.withLock { $0.resource = resource }
                    return .some(answer)
                } catch {
                    if error.isUnsupported {
                        if restart {
                            repost("the server takes no ICE restart (\(error.status ?? 0))")
                        } else {
                            log("whip: the server takes no trickled candidates (\(error.status ?? 0)); the ones in the offer have to do")
                            trickle = false
                        }
                    } else if restart && error.status == nil {
                        perform(controller.handle(.restartUndelivered("\(error)"), at: clock.now))
                    } else {
                        log(.warning("whip: \(error)"))
                        if restart { repost("the ICE restart failed") }
                    }
                    return nil
                }
            }
            func perform(_ actions: [SessionController.Action]) {
                for action in actions {
                    switch action {
                    case .log(let message): log(message)
                    case .trickle(let line, _):
                        // The end of the offer's candidates went with it.
                        guard trickle, !line.isEmpty else { continue }
                        let transport = media.localTransport
                        _ = patch(ICEFragment(ufrag: transport.ufrag, password: transport.password, candidates: [line]), restart: false)
                    case .restartICE:
                        do {
                            let credentials = try media.transport.restartICE(controlling: true, servers: linkServers + publisher.options.iceServers)
                            perform(controller.handle(.restartBegan(ufrag: credentials.ufrag, password: credentials.password), at: clock.now))
                        } catch {
                            perform(controller.handle(.restartFailed("\(error)"), at: clock.now))
                        }
                    case .sendRestartFragment(let fragment):
                        guard let answered = patch(fragment, restart: true) else { continue }
                        guard let answer = answered else {
                            repost("the server answered the ICE restart without its own credentials")
                            continue
                        }
                        do {
                            try media.acceptRestart(ufrag: answer.ufrag, password: answer.password, candidates: answer.candidates)
                            outcome.withLock { $0.restarts += 1 }
                            perform(controller.handle(.restartAnswered, at: clock.now))
                        } catch {
                            repost("the server's answer to the ICE restart: \(error)")
                        }
                    case .end(.repost(let reason)): repost(reason)
                    case .secured: outcome.withLock { $0.securedAt = $0.securedAt ?? .now }
                    case .end, .addRemoteCandidate, .answer, .accept, .answerRestartFragment, .reconnectSignaling:
                        break  // a WHIP server sends no offers, candidates or byes of its own
                    }
                }
            }
            while !over.load(ordering: .relaxed) && !outcome.withLock({ $0.repost }) {
                // Until the next event, the controller's next moment or the next look at the addresses.
                let before = clock.now
                let until = [controller.nextTick, addresses.nextLook].compactMap { $0 }.min() ?? before
                for (s, event) in publisher.events.take(timeout: until > before ? until - before : .zero) where s == session {
                    guard let event else { continue }
                    perform(controller.handle(.transport(event), at: clock.now))
                }
                let now = clock.now
                let changed = addresses.changed(at: now).map { (before: Array($0), now: Array(addresses.addresses)) }
                if changed != nil || controller.nextTick.map({ now >= $0 }) ?? false {
                    perform(controller.handle(.tick(addressesChanged: changed), at: now))
                }
            }
        }
    }
}
