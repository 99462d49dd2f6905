import EndpointSignaling
import MediaCore
import Dispatch
import FoundationEssentials
import Platform
import RTPTransport
import Signaling
import Synchronization
import ICEServers

/// Where and how to reach a Janus VideoRoom (Janus's `janus.plugin.videoroom`) through Janus's
/// HTTP API.
public struct JanusRoomOptions: Sendable {
    /// The API's root, e.g. `http://127.0.0.1:8088/janus`.
    public var endpoint: HTTPURL
    public var room: UInt64
    /// Janus's API secret, when it wants one (`api_secret` in janus.jcfg).
    public var apiSecret: String?
    /// PEM CAs for an https endpoint (nil: the system's).
    public var caFile: String?
    /// The name this publisher shows in the room; for a subscriber, the publisher to watch.
    public var display: String?
    /// A subscriber: the publisher (feed) to watch; nil takes the first (with `display`, the first of that name).
    public var feed: UInt64?
    /// A subscriber: how long to wait for a publisher to appear in the room.
    public var feedWait: Duration = .seconds(10)
    public var iceServers: [ICEServer] = []
    public var iceTransportPolicy: ICETransportPolicy = .all
    public var encodingMode: VideoEncodingMode = .auto
    public var maxVideoBitrate = 2_500_000
    /// How long to gather before the description goes (later candidates are trickled).
    public var gatheringWait: Duration = .seconds(2)

    public init(endpoint: HTTPURL, room: UInt64) {
        self.endpoint = endpoint
        self.room = room
    }
}

/// What a publication into, or a subscription from, a Janus VideoRoom did, for the summary line.
public struct JanusRoomSummary: Sendable {
    /// The publisher's id in the room (a subscriber: the feed it watched).
    public var feed: UInt64?
    /// From the request with our description to Janus's answer (a publisher), or from the join
    /// to Janus's offer (a subscriber).
    public var answeredIn: Duration?
    /// From that request until DTLS keyed SRTP.
    public var connectedIn: Duration?
    public var sent: SenderStatistics?
    public var received: ReceiverSummary?
    public var endReason = ""
}

/// One Janus session with a handle on the VideoRoom plugin: a thread long-polls the session's
/// events (and keeps it alive); a request waits for the event that answers its transaction, and
/// every other event goes to `onEvent`.
final class JanusVideoRoomHandle: Sendable {
    static let plugin = "janus.plugin.videoroom"
    let client: JanusClient
    let session: UInt64
    let handle: UInt64
    private let answers = BlockingQueue<JSONValue>()
    private let awaited = Mutex<String?>(nil)
    private let over = Atomic<Bool>(false)
    private let onEvent: @Sendable (JSONValue) -> Void
    private let log: @Sendable (LogMessage) -> Void

    init(client: JanusClient, log: @escaping @Sendable (LogMessage) -> Void, onEvent: @escaping @Sendable (JSONValue) -> Void) throws(JanusError) {
        self.client = client
        self.log = log
        self.onEvent = onEvent
        session = try client.createSession()
        do { handle = try client.attach(session: session, plugin: Self.plugin) } catch {
            try? client.destroy(session: session)
            throw error
        }
        log("janus: session \(session), VideoRoom handle \(handle)")
        startThread(named: "janus-events") { [self] in poll() }
    }

    private func poll() {
        var lastKeepalive = MediaTime.now
        var failures = 0
        while !over.load(ordering: .relaxed) {
            if MediaTime.now - lastKeepalive >= .seconds(20) {
                try? client.keepalive(session: session)
                lastKeepalive = .now
            }
            let events: [JSONValue]
            do {
                events = try client.events(session: session)
                failures = 0
            } catch {
                if over.load(ordering: .relaxed) { return }
                failures += 1
                log(.warning("janus: \(error)"))
                if failures >= 5 || error.code == 458 {
                    onEvent(.object(["janus": .string("lost"), "reason": .string(error.description)]))
                    return
                }
                _ = answers.take(timeout: .seconds(1))  // a pause before polling again (nothing else is queued there meanwhile)
                continue
            }
            for event in events {
                if let transaction = event["transaction"]?.stringValue, transaction == awaited.withLock({ $0 }), event["janus"]?.stringValue == "event" {
                    _ = answers.append(event)
                } else {
                    onEvent(event)
                }
            }
        }
    }

    /// Sends `body` (with a JSEP description) to the plugin and returns its answer: at once for a
    /// synchronous request, else the event with the request's transaction (within `timeout`).
    func request(_ body: JSONValue, jsep: JSONValue? = nil, on other: UInt64? = nil, timeout: Duration = .seconds(15)) throws(JanusError) -> (data: JSONValue, jsep: JSONValue?) {
        let what = body["request"]?.stringValue ?? "message"
        let transaction = JanusClient.transaction()
        awaited.withLock { $0 = transaction }
        defer { awaited.withLock { $0 = nil } }
        switch try client.message(session: session, handle: other ?? handle, body: body, jsep: jsep, transaction: transaction) {
        case .data(let data): return (data, nil)
        case .ack: break
        }
        let deadline = MediaTime.now + timeout
        while MediaTime.now < deadline {
            for event in answers.take(timeout: deadline - .now) where event["transaction"]?.stringValue == transaction {
                let data = event["plugindata"]?["data"] ?? .null
                try JanusClient.checkPlugin(data, request: what)
                return (data, event["jsep"])
            }
        }
        throw JanusError(code: nil, "Janus did not answer '\(what)' within \(timeout)")
    }

    /// Ends the session (and with it the handle and its PeerConnection).
    func close() {
        guard !over.exchange(true, ordering: .relaxed) else { return }
        do {
            try client.destroy(session: session)
            log("janus: session \(session) destroyed")
        } catch {
            log(.warning("janus: \(error)"))
        }
    }

    /// A JSEP object for Janus.
    static func jsep(_ description: JSEPDescription, trickle: Bool) -> JSONValue {
        .object(["type": .string(description.type == .offer ? "offer" : "answer"), "sdp": .string(description.sdp), "trickle": .bool(trickle)])
    }
}

/// Publishes a camera and a microphone into a Janus VideoRoom, or watches one publisher of it,
/// through Janus's HTTP API. The publisher offers (sendonly VP8 + Opus, bundled, with the
/// candidates gathered first, later ones trickled) in a `joinandconfigure`; the subscriber joins
/// with the feed and answers Janus's offer in a `start`. Janus's RTCP (receiver reports, NACK,
/// PLI, FIR, REMB and transport-wide feedback) drives the publisher's estimate like any peer's.
/// Runs on the calling thread until the duration passes, Janus hangs up, or `stop()`.
public final class JanusVideoRoom: Sendable {
    public enum Role: Sendable { case publisher, subscriber }

    public let options: JanusRoomOptions
    public let role: Role
    public let media: Call.Media
    public let duration: Duration?
    private let log: @Sendable (LogMessage) -> Void
    private let certificate: DTLSCertificate
    private let client: JanusClient
    private let stopRequested = Atomic<Bool>(false)
    private let running = Mutex<CallMedia?>(nil)
    /// Why Janus ended the media (a hangup, the session lost), when it did.
    private let ended = Mutex<String?>(nil)
    /// A subscriber waiting for its publisher: the handle that sits in the room to hear of
    /// publishers (`findFeed`), and what Janus says to it (nil: `stop()` wakes the wait).
    private let lookout = Mutex<UInt64?>(nil)
    private let lookoutEvents = BlockingQueue<JSONValue?>()

    public init(_ role: Role, options: JanusRoomOptions, media: Call.Media, duration: Duration?, log: @escaping @Sendable (LogMessage) -> Void = { _ in }) throws {
        self.role = role
        self.options = options
        self.media = media
        self.duration = duration
        self.log = log
        certificate = try DTLSCertificate()
        client = try JanusClient(endpoint: options.endpoint, apiSecret: options.apiSecret, caFile: options.caFile)
    }

    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        running.withLock { $0 }?.stop()
        _ = lookoutEvents.append(nil)
    }

    private var stopped: Bool { stopRequested.load(ordering: .relaxed) }

    /// The events Janus sends about this handle while media runs.
    private func handle(_ event: JSONValue, media made: @escaping @Sendable () -> CallMedia?) {
        switch JanusEvent(event) {
        case .webRTCUp: log("janus: PeerConnection up")
        case .media(let what, let receiving):
            log("janus: \(receiving ? "receiving" : "no longer receiving") our \(what)")
        case .slowLink(let uplink, let lost):
            log(.warning("janus: slow link (\(uplink ? "from Janus" : "to Janus"), \(lost.map(String.init) ?? "some") packets lost)"))
        case .trickle(nil):
            made()?.transport.remoteGatheringDone()
        case .trickle(let line?):
            do { try made()?.transport.addRemoteCandidate(line) } catch { log(.warning("janus: its candidate \(line): \(error)")) }
        case .ended(let why):
            // Janus hangs up after our own end too (our DTLS close): that is no news.
            guard let media = made() else { return }
            log(.warning("janus: the session ended (\(why))"))
            ended.withLock { $0 = $0 ?? "Janus ended the session (\(why))" }
            media.stop()
        case .roomDestroyed:
            ended.withLock { $0 = $0 ?? "the room was destroyed" }
            made()?.stop()
        case .publisherLeft(let feed):
            if role == .subscriber, feed == options.feed { log("janus: the publisher left") }
        case .other: break
        }
    }

    /// Publishes, or subscribes, until the duration passes, Janus ends it, or `stop()`; throws
    /// when Janus refuses (no such room, a wrong secret), its description is unusable, or no
    /// path to it comes up.
    public func run() throws -> JanusRoomSummary {
        let deadline = duration.map { MediaTime.now + $0 }
        defer { media.close() }
        let current = Mutex<CallMedia?>(nil)
        let room = try JanusVideoRoomHandle(client: client, log: log) { [self] event in
            if let sender = JanusClient.id(event["sender"]), sender == lookout.withLock({ $0 }) {
                _ = lookoutEvents.append(event)
            } else {
                handle(event, media: { current.withLock { $0 } })
            }
        }
        defer { room.close() }
        let events = BlockingQueue<BundleTransport.Event?>(capacity: 4096)
        var ice = ICEAgent.Configuration(controlling: role == .publisher)
        ice.servers = options.iceServers
        ice.relayOnly = options.iceTransportPolicy == .relay
        let made = try CallMedia(media: media, ice: ice, certificate: certificate, receives: role == .subscriber) { event in _ = events.append(event) }
        defer { made.transport.close() }
        current.withLock { $0 = made }
        var summary = JanusRoomSummary()
        let call: NegotiatedCall
        let asked: MediaTime
        var trickle: Bool
        switch role {
        case .publisher:
            let gathered = CallMedia.gather(for: options.gatheringWait, stopped: { stopped }) { events.take(timeout: $0) }
            if stopped { return stoppedSummary() }
            var offer = made.offer()
            offer.transport.candidates = gathered.candidates
            offer.transport.endOfCandidates = gathered.complete
            trickle = !gathered.complete
            var body: [String: JSONValue] = ["request": .string("joinandconfigure"), "room": .number(Double(options.room)), "ptype": .string("publisher"), "audio": .bool(media.audioTrack != nil), "video": .bool(media.videoTrack != nil)]
            if let display = options.display { body["display"] = .string(display) }
            log("janus: joining room \(options.room) as a publisher (\(gathered.candidates.count) candidates\(trickle ? ", more to trickle" : ""))")
            asked = .now
            let reply = try room.request(.object(body), jsep: JanusVideoRoomHandle.jsep(offer, trickle: trickle))
            guard let id = JanusClient.id(reply.data["id"]), let sdp = reply.jsep?["sdp"]?.stringValue else {
                throw NegotiationError("Janus joined us to room \(options.room) without a publisher id or an answer")
            }
            summary.feed = id
            summary.answeredIn = .now - asked
            log("janus: published as \(id) in room \(options.room), answered in \(Int((MediaTime.now - asked).inMilliseconds)) ms")
            let answer: JSEPDescription
            do { answer = try JSEPDescription(type: .answer, sdp: sdp) } catch { throw NegotiationError("Janus's answer is not a usable SDP answer: \(error)") }
            call = try made.accept(answer, to: offer)
        case .subscriber:
            let feed = try findFeed(room)
            summary.feed = feed
            asked = .now
            let body: JSONValue = .object(["request": .string("join"), "room": .number(Double(options.room)), "ptype": .string("subscriber"),
                                          "streams": .array([.object(["feed": .number(Double(feed))])])])
            let reply = try room.request(body)
            guard let sdp = reply.jsep?["sdp"]?.stringValue, reply.jsep?["type"]?.stringValue == "offer" else {
                throw NegotiationError("Janus attached us to feed \(feed) without an offer")
            }
            summary.answeredIn = .now - asked
            let offer: JSEPDescription
            do { offer = try JSEPDescription(type: .offer, sdp: sdp) } catch { throw NegotiationError("Janus's offer is not a usable SDP offer: \(error)") }
            var (answer, negotiated) = try made.answer(offer)
            let gathered = CallMedia.gather(for: options.gatheringWait, stopped: { stopped }) { events.take(timeout: $0) }
            if stopped { return stoppedSummary() }
            answer.transport.candidates = gathered.candidates
            answer.transport.endOfCandidates = gathered.complete
            trickle = !gathered.complete
            _ = try room.request(.object(["request": .string("start")]), jsep: JanusVideoRoomHandle.jsep(answer, trickle: trickle))
            log("janus: watching feed \(feed) in room \(options.room)")
            call = negotiated
        }
        let streams = call.streams.map { "\($0.kind.rawValue) \($0.codec.name) \(JSEPDescription.Direction(sends: $0.sends, receives: $0.receives).rawValue)" }
        log("media: \(streams.joined(separator: ", ")) over ICE + DTLS-SRTP (BUNDLE)")
        running.withLock { $0 = made }
        defer { running.withLock { $0 = nil } }
        if stopped { made.stop() }
        // The transport's events while media runs: late candidates go to Janus, the rest to the log.
        let secured = Mutex<MediaTime?>(nil)
        let trickling = Atomic<Bool>(trickle)
        let watcher = SessionWatcher(.init(offerer: role == .publisher, restarts: .answersOnly, gatheringWait: options.gatheringWait, peer: "Janus"),
                                     thread: "janus-watcher", events: events, log: log) { [client, room, log] action in
            if action == .secured { secured.withLock { $0 = $0 ?? .now } }
            guard case .trickle(let line, _) = action, trickling.load(ordering: .relaxed) else { return }
            if line.isEmpty {
                trickling.store(false, ordering: .relaxed)
                try? client.trickle(session: room.session, handle: room.handle, candidates: [], completed: true)
            } else {
                do { try client.trickle(session: room.session, handle: room.handle, candidates: [line]) } catch { log(.warning("janus: \(error)")) }
            }
        }
        var encoding = CallMedia.Encoding()
        encoding.mode = options.encodingMode
        encoding.maxVideoBitrate = options.maxVideoBitrate
        encoding.onDecision = { [log] decision in log("\(decision.line)") }
        let result = Result { try made.run(call, media: media, encoding: encoding, duration: deadline.map { $0 - MediaTime.now }) }
        current.withLock { $0 = nil }
        watcher.stop()
        if let at = secured.withLock({ $0 }) { summary.connectedIn = at - asked }
        let (sent, received) = try result.get()
        if role == .publisher { summary.sent = sent } else { summary.received = received }
        summary.endReason = ended.withLock { $0 } ?? (stopped ? "stopped" : "done")
        return summary
    }

    private func stoppedSummary() -> JanusRoomSummary {
        var summary = JanusRoomSummary()
        summary.endReason = "stopped"
        return summary
    }

    /// The feed to watch: the one asked for, or the first publisher in the room (of that display
    /// name), waiting up to `feedWait` for one to appear. Janus tells of a new publisher only the
    /// room's participants, so a second handle joins as one that publishes nothing, hears the
    /// room's publishers in its join's answer and then as they come, and is detached (leaving the
    /// room) once the feed is known.
    private func findFeed(_ room: JanusVideoRoomHandle) throws -> UInt64 {
        if let feed = options.feed { return feed }
        let until = MediaTime.now + options.feedWait
        let id = try room.client.attach(session: room.session, plugin: JanusVideoRoomHandle.plugin)
        lookout.withLock { $0 = id }
        defer { try? room.client.detach(session: room.session, handle: id) }
        let joined = try room.request(.object(["request": .string("join"), "room": .number(Double(options.room)), "ptype": .string("publisher"),
                                               "display": .string("callend subscriber, waiting for a publisher")]), on: id)
        var news = [joined.data]
        var announced = false
        while true {
            for data in news {
                guard case .array(let publishers)? = data["publishers"] else { continue }
                for p in publishers {
                    guard options.display == nil || p["display"]?.stringValue == options.display, let feed = JanusClient.id(p["id"]) else { continue }
                    log("janus: feed \(feed)\(p["display"]?.stringValue.map { " (\($0))" } ?? "") publishes in room \(options.room)")
                    return feed
                }
            }
            if stopped { throw NegotiationError("stopped before a publisher appeared") }
            guard MediaTime.now < until else {
                throw NegotiationError("no publisher\(options.display.map { " named '\($0)'" } ?? "") in Janus room \(options.room) within \(options.feedWait)")
            }
            if !announced {
                log("janus: no publisher in room \(options.room) yet; waiting up to \(options.feedWait)")
                announced = true
            }
            news = lookoutEvents.take(timeout: until - .now).compactMap { $0?["plugindata"]?["data"] }
        }
    }
}

extension CallMedia {
    /// The candidates gathered before a description goes: until gathering ends, `wait` passes,
    /// or `stopped`. `take` hands over the transport's events (nil ones only wake).
    static func gather(for wait: Duration, stopped: () -> Bool, take: (Duration) -> [BundleTransport.Event?]) -> (candidates: [String], complete: Bool) {
        var candidates: [String] = []
        let until = MediaTime.now + wait
        while !stopped() && MediaTime.now < until {
            for event in take(until - .now) {
                switch event {
                case .localCandidate(let line, _)?: candidates.append(line)
                case .gatheringDone?: return (candidates, true)
                default: break
                }
            }
        }
        return (candidates, false)
    }
}
