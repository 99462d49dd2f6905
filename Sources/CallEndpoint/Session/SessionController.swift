import MediaCore
import Platform
import RTPTransport
import Signaling

/// What a media session does between its first offer/answer and its end, as a pure state machine:
/// no thread, lock, socket or clock. Its driver hands it events at a `MediaTime` (a signaling
/// message, a transport event, the result of an action it asked for, a tick) and performs the
/// actions it returns; tests drive it in virtual time.
///
/// It owns the session's control: trickling candidates both ways, when to restart ICE
/// (`ICERestartPolicy`), glare between two restarts (the round's offerer wins), how often a peer
/// may make this side renegotiate (`RenegotiationLimit`), a restart a peer makes by ICE fragment
/// (RFC 9725 §4.4: its answer waits for the new agent's candidates), an offer that starts a new
/// session, and the end with its reason. What a session carries and how its signaling travels
/// are its configuration: a call's or a mesh peer's offers and answers through the room's relay,
/// or a WHIP publisher's fragments PATCHed to the server.
struct SessionController: Sendable {
    enum Restarts: Sendable, Equatable {
        /// Either side restarts with a whole offer through the room's relay (RFC 8829 §5.2.1).
        case offers
        /// This side restarts by PATCHing an ICE fragment to the server's resource (RFC 9725 §4.4);
        /// past `maxTries` restarts without a path, the session is posted again.
        case fragmentsToServer(maxTries: Int)
        /// This side never restarts; it answers the peer's (a WHEP viewer's PATCH). A mesh peer and
        /// a Janus session, whose signaling carries no restart, are this too.
        case answersOnly
    }

    struct Configuration: Sendable {
        /// The round's offerer (the controlling agent): it restarts first and wins glare.
        var offerer: Bool
        var restarts: Restarts
        /// How long a restart's agent gathers before its fragment goes with what it has.
        var gatheringWait: Duration
        /// The peer's name, for the log.
        var peer: String
        /// Before every log line ("whep: viewer-1: " for one of several sessions of an endpoint).
        var logPrefix = ""
    }

    enum Event: Sendable {
        /// An offer of the peer, and whether it continues this session (same origin and certificate).
        case peerOffer(JSEPDescription, continuesSession: Bool)
        /// An offer the peer sent that could not be read.
        case unreadableOffer(String)
        case peerAnswer(JSEPDescription)
        /// The peer restarts ICE with a fragment: its new credentials and candidates (a WHIP
        /// publisher's PATCH, relayed by the service).
        case peerRestartFragment(ufrag: String, password: String, candidates: [String])
        /// A trickled candidate ("" is the end of them) of the agent with `ufrag` (nil: the current one).
        case peerCandidate(line: String, ufrag: String?)
        /// The peer ended the session; `refusal` when it refused it (a bye with a status).
        case bye(refusal: String?)
        case transport(BundleTransport.Event)
        /// `restartICE`'s or `answerRestartFragment`'s new agent is gathering under these credentials.
        case restartBegan(ufrag: String, password: String)
        /// `restartICE` or `answerRestartFragment` could not start an agent.
        case restartFailed(String)
        /// `answer` was sent; `restartsICE` when it moved ICE to new credentials.
        case answered(restartsICE: Bool)
        /// The server accepted `sendRestartFragment`'s fragment and the new agent checks its path.
        case restartAnswered
        /// `sendRestartFragment` could not reach the server (why): the restart is made again later.
        case restartUndelivered(String)
        /// Time passed: at `nextTick` at the latest, or when the driver looked at the local
        /// addresses (before and now, when they changed).
        case tick(addressesChanged: (before: [String], now: [String])?)
    }

    enum Action: Sendable, Equatable {
        case addRemoteCandidate(line: String, ufrag: String?)
        /// A local candidate for the peer ("" is the end of them).
        case trickle(line: String, ufrag: String)
        /// Start a new controlling agent (with `.offers`, in a restart offer sent to the peer) and
        /// answer `restartBegan` or `restartFailed`.
        case restartICE(reason: String)
        /// Answer this offer in the session and answer `answered`.
        case answer(JSEPDescription)
        /// The peer's answer to our restart offer.
        case accept(JSEPDescription)
        /// Start a new controlled agent for the peer's fragment restart and answer `restartBegan`
        /// or `restartFailed`.
        case answerRestartFragment(ufrag: String, password: String, candidates: [String])
        /// Send the new agent's fragment: to the server (our restart), or as the answer to the peer's.
        case sendRestartFragment(ICEFragment)
        /// DTLS keyed SRTP: media flows from now (for the time to connect).
        case secured
        /// The signaling connection may use an address that left: connect again.
        case reconnectSignaling(String)
        case end(EndReason)
        case log(LogMessage)
    }

    enum EndReason: Sendable, Equatable {
        case bye
        case refused(String)
        /// An offer of a new session: the event and those after it belong to the next round.
        case newSession
        /// The server's session is no use any more: post a new one.
        case repost(String)
    }

    var configuration: Configuration
    private var policy: ICERestartPolicy
    private var offersTaken = RenegotiationLimit()
    /// Our restart offer waits for its answer.
    private(set) var awaitingAnswer = false
    /// A restart's new agent gathering: its credentials, candidates so far, and when its fragment goes.
    private var gathering: (ufrag: String, password: String, candidates: [String], until: MediaTime, ours: Bool)?
    /// A restart that could not start, or whose fragment could not be sent, is tried then.
    private var restartNotBefore: MediaTime?
    private var retryDue = false
    /// Local addresses changed and no restart has answered it yet (one came too soon after the
    /// last restart, or during one): it restarts as soon as the policy lets it.
    private var addressesChangedSinceRestart = false
    /// Restarts by fragment since the path last worked.
    private var restartsTried = 0
    /// Local candidates by type ("host", "srflx", "relay"), for the line at the end of gathering.
    private var gathered: [String: Int] = [:]
    /// ICE restarts made or answered.
    private(set) var restarts = 0
    private(set) var ended: EndReason?

    init(_ configuration: Configuration) {
        self.configuration = configuration
        policy = ICERestartPolicy(offerer: configuration.offerer)
    }

    /// When the next tick is due without any event: a gathering's fragment going, a restart the
    /// policy or a retry makes (nil: none; a time already past: at once). Drivers wait until
    /// then or the next event, whichever comes first; nothing asks every few milliseconds.
    var nextTick: MediaTime? {
        guard ended == nil else { return nil }
        var moments: [MediaTime] = []
        if let gathering { moments.append(gathering.until) }
        if configuration.restarts != .answersOnly, pendingReason == nil, gathering == nil {
            let addressMoment = addressesChangedSinceRestart ? policy.addressRestart ?? MediaTime(microseconds: 0) : nil
            for moment in [retryDue ? restartNotBefore : nil, policy.nextRestart, addressMoment].compactMap({ $0 }) {
                moments.append(max(moment, restartNotBefore ?? moment))
            }
        }
        return moments.min()
    }

    mutating func handle(_ event: Event, at now: MediaTime) -> [Action] {
        guard ended == nil else { return [] }
        var actions = step(event, at: now)
        if !configuration.logPrefix.isEmpty {
            for i in actions.indices {
                if case .log(var message) = actions[i] {
                    message.text = configuration.logPrefix + message.text
                    actions[i] = .log(message)
                }
            }
        }
        return actions
    }

    private mutating func step(_ event: Event, at now: MediaTime) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .bye(let refusal):
            end(refusal.map { .refused($0) } ?? .bye, &actions)
        case .peerCandidate(let line, let ufrag):
            actions.append(.addRemoteCandidate(line: line, ufrag: ufrag))
        case .peerRestartFragment(let ufrag, let password, let candidates):
            answeringFragment = true
            actions.append(.answerRestartFragment(ufrag: ufrag, password: password, candidates: candidates))
        case .unreadableOffer(let why):
            // Not a new session either: what works goes on (JSEP has no way to refuse one offer
            // and keep the session).
            actions.append(.log(.warning("signaling: ignored an offer of \(configuration.peer) that callend cannot read: \(why)")))
        case .peerOffer(let offer, let continues):
            guard continues else {
                end(.newSession, &actions)
                break
            }
            if awaitingAnswer && configuration.offerer {
                actions.append(.log("ice: both sides restarted at once; the peer answers ours"))
            } else if !offersTaken.allow(at: now.sinceOrigin) {
                actions.append(.log(.warning("ice: the peer offers restarts faster than \(Int(offersTaken.burst)) at once and one per \(offersTaken.interval): this one is ignored")))
            } else {
                actions.append(.answer(offer))
            }
        case .answered(let restartsICE):
            if restartsICE {
                awaitingAnswer = false  // ours gives way to the peer's
                restarts += 1
                actions.append(.log("ice: answered the peer's restart"))
            }
        case .peerAnswer(let answer):
            if awaitingAnswer {
                awaitingAnswer = false
                actions.append(.accept(answer))
            }
        case .restartBegan(let ufrag, let password):
            restartBegan(ufrag: ufrag, password: password, at: now, &actions)
        case .restartFailed(let why):
            if answeringFragment {
                answeringFragment = false
                actions.append(.log(.warning("ice: cannot answer the restart of \(configuration.peer): \(why)")))
            } else {
                actions.append(.log(.warning("ice: cannot restart: \(why)")))
                restartNotBefore = now + .seconds(1)
                pendingReason = nil
            }
        case .restartAnswered:
            restarts += 1
            actions.append(.log("whip: ICE restart answered; checking the new path"))
        case .restartUndelivered(let why):
            actions.append(.log(.warning("whip: \(why); the restart goes again in 2 s")))
            restartNotBefore = now + .seconds(2)
            retryDue = true
        case .transport(let transportEvent):
            transport(transportEvent, at: now, &actions)
        case .tick(let addresses):
            tick(addresses: addresses, at: now, &actions)
        }
        return actions
    }

    /// Why the restart asked for last was made, for its log line once it began.
    private var pendingReason: String?
    /// `answerRestartFragment` asked for and not yet begun.
    private var answeringFragment = false

    private mutating func end(_ reason: EndReason, _ actions: inout [Action]) {
        ended = reason
        actions.append(.end(reason))
    }

    private mutating func restartBegan(ufrag: String, password: String, at now: MediaTime, _ actions: inout [Action]) {
        if answeringFragment {
            // The peer's fragment restart: our answer goes once our new agent has gathered.
            answeringFragment = false
            restarts += 1
            gathering = (ufrag, password, [], now + configuration.gatheringWait, false)
            actions.append(.log("ice: \(configuration.peer) restarts ICE by fragment (RFC 9725 §4.4)"))
        } else if let reason = pendingReason {
            // Our restart: with offers, the offer went with the agent; with fragments, it goes once gathered.
            pendingReason = nil
            policy.restarted(at: now)
            addressesChangedSinceRestart = false  // the new agent gathers on the addresses there are now
            // (A session that only answers asks for no restart of its own: `tick` sets no reason.)
            if case .fragmentsToServer = configuration.restarts {
                restartsTried += 1
                gathering = (ufrag, password, [], now + configuration.gatheringWait, true)
                actions.append(.log("ice: restarting (\(reason)) by PATCH"))
            } else {
                awaitingAnswer = true
                restarts += 1
                actions.append(.log("ice: restarting (\(reason))"))
            }
        }
    }

    private mutating func transport(_ event: BundleTransport.Event, at now: MediaTime, _ actions: inout [Action]) {
        switch event {
        case .localCandidate(let line, let ufrag):
            if gathering?.ufrag == ufrag {
                gathering?.candidates.append(line)
                return
            }
            let fields = line.split(separator: " ")
            if let typ = fields.firstIndex(of: "typ"), typ + 1 < fields.count { gathered[String(fields[typ + 1]), default: 0] += 1 }
            actions.append(.trickle(line: line, ufrag: ufrag))
        case .gatheringDone(let ufrag):
            if gathering?.ufrag == ufrag {
                sendGathered(complete: true, &actions)
                return
            }
            let counts = gathered.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            actions.append(.log("ice: gathered \(counts.isEmpty ? "no candidates" : counts.joined(separator: ", "))"))
            gathered = [:]
            actions.append(.trickle(line: "", ufrag: ufrag))
        case .selectedPair(let pair): actions.append(.log("ice: \(pair)"))
        case .state: break
        case .secured(let profile):
            actions.append(.log("dtls: connected, SRTP \(profile.rawValue)"))
            actions.append(.secured)
        case .failed(let why), .untrusted(let why): actions.append(.log(.warning(why)))
        case .closedByPeer: actions.append(.log("dtls: the peer closed the connection"))
        case .pathLost(let why):
            let cause = switch why {
            case .consentExpired(let silence):
                "consent expired (RFC 7675: nothing authenticated from the peer for \(silence.inMilliseconds / 1000).\(silence.inMilliseconds % 1000 / 100) s)"
            case .pairFailed: "the ICE agent failed the path (no keepalive answered)"
            }
            actions.append(.log(.warning("ice: \(cause): sending paused, checking the path again every second")))
            policy.pathLost(at: now)
        case .pathRestored:
            actions.append(.log("ice: the path works again"))
            policy.pathRestored()
        case .heardWhileLost:
            if policy.lostSince != nil { policy.heard(at: now) }
        case .restarted:
            restartsTried = 0
            actions.append(.log("ice: restart done, the new path carries the media"))
        }
    }

    /// The gathering agent's fragment goes (all candidates, or what there is when time ran out).
    /// A fragment PATCHed to a server is all this side will send; an answer says whether more
    /// could have come.
    private mutating func sendGathered(complete: Bool, _ actions: inout [Action]) {
        guard let g = gathering else { return }
        gathering = nil
        var final = complete
        if case .fragmentsToServer = configuration.restarts { final = true }
        actions.append(.sendRestartFragment(ICEFragment(ufrag: g.ufrag, password: g.password, candidates: g.candidates, endOfCandidates: final)))
        if !g.ours { actions.append(.log("ice: answered the restart of \(configuration.peer) with \(g.candidates.count) candidates")) }
    }

    private mutating func tick(addresses: (before: [String], now: [String])?, at now: MediaTime, _ actions: inout [Action]) {
        if let g = gathering, now >= g.until { sendGathered(complete: false, &actions) }
        if let addresses {
            actions.append(.log("network: local addresses now \(addresses.now.sorted().joined(separator: " ")) (were \(addresses.before.sorted().joined(separator: " ")))"))
            // The signaling connection may have used a departed address: TCP would take minutes to say so.
            if configuration.restarts == .offers { actions.append(.reconnectSignaling("local addresses changed")) }
            if configuration.restarts != .answersOnly { addressesChangedSinceRestart = true }
        }
        guard configuration.restarts != .answersOnly, pendingReason == nil, gathering == nil, restartNotBefore.map({ now >= $0 }) ?? true else { return }
        let changed = addressesChangedSinceRestart
        let retry = retryDue
        guard retry || policy.shouldRestart(at: now, addressesChanged: changed) else { return }
        retryDue = false
        restartNotBefore = nil
        if case .fragmentsToServer(let maxTries) = configuration.restarts, restartsTried >= maxTries {
            end(.repost("\(maxTries == 2 ? "two" : String(maxTries)) ICE restarts did not bring the path back"), &actions)
            return
        }
        let reason = retry ? "again" : changed ? "local addresses changed" : policy.reason(at: now)
        pendingReason = reason
        actions.append(.restartICE(reason: reason))
    }
}
