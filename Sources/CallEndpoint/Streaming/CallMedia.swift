import Dispatch
import MediaCore
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization
import ICEServers

/// The media of one round of a call: one bundled transport (ICE, DTLS-SRTP), the offer/answer
/// that sets it up, and a `MediaSender` and `MediaReceiver` on it once DTLS has keyed SRTP.
/// Gathering starts when it is made, so candidates are ready by the time the description goes.
public final class CallMedia: @unchecked Sendable {  // the transport and local media are immutable; sender/receiver and the secured state are behind locks
    public let transport: BundleTransport
    public let local: LocalMedia
    private let parts = Mutex<(MediaSender?, MediaReceiver?)>((nil, nil))
    /// nil while DTLS runs; then secured (nil reason) or failed (the reason).
    private let outcome = Mutex<String??>(nil)
    private let settled = DispatchSemaphore(value: 0)
    private let stopRequested = Atomic<Bool>(false)
    /// Set when the peer's certificate did not match its description.
    let untrusted = Mutex<String?>(nil)
    /// This round's data channels, once both sides agreed on them; the association starts
    /// when DTLS is up.
    private let data = Mutex<DataChannelSession?>(nil)
    private let dataTrack: DataTrack?

    /// How long ICE and DTLS may take once both descriptions are known (RFC 8445 checks take
    /// seconds at worst through TURN; a peer that never answers must not hold the round for ever).
    public static let connectTimeout: Duration = .seconds(30)

    /// The thread that runs this session's media loop along with others' (a viewer's, with the
    /// endpoint's other viewers), or nil for a thread of its own. Set before `run`.
    var loopGroup: MediaLoopGroup?
    /// Told why, when this side aborts the data channels' association (the peer broke a bound:
    /// a message over our a=max-message-size, more than the reassembly holds); the call goes on.
    var onDataAborted: (@Sendable (String) -> Void)?

    /// `receives` false: this side offers and answers without taking the peer's media (a WHIP publisher).
    public init(media: Call.Media, ice: ICEAgent.Configuration, certificate: DTLSCertificate, receives: Bool = true,
                onEvent: @escaping @Sendable (BundleTransport.Event) -> Void) throws {
        var local = LocalMedia(sendsVideo: media.videoTrack != nil, sendsAudio: media.audioTrack != nil)
        local.receives = receives
        local.dataChannels = media.dataTrack != nil
        // A recording is WebM, a VP8 container: a call that records stays in VP8.
        local.videoCodecs = media.recording == nil ? media.videoCodecs : [.vp8]
        dataTrack = media.dataTrack
        self.local = local
        final class Outcome: @unchecked Sendable {  // set once, right after init
            weak var media: CallMedia?
        }
        let me = Outcome()
        transport = try BundleTransport(configuration: .init(ice: ice, certificate: certificate)) { event in
            switch event {
            case .secured:
                me.media?.data.withLock { $0 }?.start()
                me.media?.settle(nil)
            case .failed(let why): me.media?.settle(why)
            case .untrusted(let why):
                me.media?.untrusted.withLock { $0 = why }
                me.media?.settle(why)
            default: break
            }
            onEvent(event)
        }
        me.media = self
        try transport.start()
    }

    deinit {
        endData()
        transport.close()
    }

    private func endData() {
        guard let session = data.withLock({ $0 }) else { return }
        dataTrack?.detach(session)
        session.close()
    }

    /// The data channel association both descriptions agreed on, its packets riding on DTLS.
    private func setUpData(_ call: NegotiatedCall) throws {
        guard let agreed = call.data, data.withLock({ $0 == nil }) else { return }
        let transport = transport
        let session = try DataChannelSession(isDTLSClient: call.dtlsRole == .client, remotePort: agreed.remotePort) { packet in
            transport.sendApplicationData(packet)
        }
        transport.onApplicationData { [weak session] packet in session?.input(packet) }
        let aborted = onDataAborted
        session.onStateChange { [weak session] up in
            if !up, let why = session?.abortReason { aborted?(why) }
        }
        data.withLock { $0 = session }
        // The track's channels open as soon as the association is up, and the peer's are taken.
        dataTrack?.attach(session)
    }

    private func settle(_ failure: String?) {
        let first = outcome.withLock { o -> Bool in
            guard o == nil else { return false }
            o = .some(failure)
            return true
        }
        if first { settled.signal() } else if let failure { stopWith(failure) }
    }

    /// A failure after media began (consent lost): the round ends with the reason.
    private let lateFailure = Mutex<String?>(nil)
    private func stopWith(_ reason: String) {
        lateFailure.withLock { $0 = reason }
        stop()
    }

    /// This side's transport for its descriptions (offers say actpass).
    public var localTransport: JSEPDescription.Transport {
        .init(ufrag: transport.localCredentials.ufrag, password: transport.localCredentials.password, fingerprint: transport.fingerprint, setup: .actpass)
    }

    /// The descriptions this round has agreed on (each side's latest), and the DTLS role: what a
    /// later offer in the same session (an ICE restart) is checked against and answered with.
    struct Session {
        var local: JSEPDescription?
        var remote: JSEPDescription?
        var role: DTLSSession.Role?
        /// Our restart offer waiting for its answer.
        var restartOffer: JSEPDescription?
    }
    private let session = Mutex(Session())

    public func offer() -> JSEPDescription {
        let offer = OfferAnswer.offer(local, transport: localTransport)
        session.withLock { $0.local = offer }
        return offer
    }

    /// Answers the peer's offer and points the transport at the peer.
    public func answer(_ offer: JSEPDescription) throws -> (JSEPDescription, NegotiatedCall) {
        let (answer, call) = try OfferAnswer.answer(offer, local: local, transport: localTransport)
        try setUpData(call)
        try transport.setRemote(call.remoteTransport, role: call.dtlsRole)
        session.withLock { $0 = Session(local: answer, remote: offer, role: call.dtlsRole) }
        return (answer, call)
    }

    /// Takes the peer's answer to our offer and points the transport at the peer.
    public func accept(_ answer: JSEPDescription, to offer: JSEPDescription) throws -> NegotiatedCall {
        let call = try OfferAnswer.negotiate(offer: offer, answer: answer, local: local)
        try setUpData(call)
        try transport.setRemote(call.remoteTransport, role: call.dtlsRole)
        session.withLock { $0 = Session(local: offer, remote: answer, role: call.dtlsRole) }
        return call
    }

    // MARK: ICE restarts (RFC 8445 §9, RFC 8829 §5.2.1)

    /// Whether `offer` comes from the peer of this round, in the same session: the origin's
    /// session id and the certificate of its last description. A peer that restarted makes a new
    /// session (and a new certificate), which is a new round instead.
    public func continuesSession(_ offer: JSEPDescription) -> Bool {
        guard let remote = session.withLock({ $0.remote }) else { return false }
        return offer.sessionID == remote.sessionID && offer.transport.fingerprint == remote.transport.fingerprint
    }

    /// Whether an answer to our restart offer is awaited.
    public var awaitsRestartAnswer: Bool { session.withLock { $0.restartOffer != nil } }

    /// The same media under new ICE credentials, from a new agent that gathers now; media stays
    /// on the current path until the new one works.
    public func restartOffer(servers: [ICEServer]? = nil) throws -> JSEPDescription {
        let credentials = try transport.restartICE(controlling: true, servers: servers)
        return try session.withLock { s in
            guard let previous = s.local else { throw NegotiationError("no description yet to restart ICE from") }
            var offer = OfferAnswer.offer(local, transport: .init(ufrag: credentials.ufrag, password: credentials.password,
                                                                  fingerprint: transport.fingerprint, setup: .actpass))
            offer.sessionID = previous.sessionID
            offer.sessionVersion = previous.sessionVersion + 1
            s.restartOffer = offer
            return offer
        }
    }

    /// The peer's answer to our restart offer: the new agent checks against its new credentials.
    public func acceptRestart(_ answer: JSEPDescription) throws {
        guard let offer = session.withLock({ s in defer { s.restartOffer = nil }; return s.restartOffer }) else {
            throw NegotiationError("an answer without an offer of ours waiting for it")
        }
        guard answer.transport.fingerprint == fingerprintOfPeer else {
            throw CallSecurityError(description: "the peer's answer to an ICE restart names another certificate")
        }
        _ = try OfferAnswer.negotiate(offer: offer, answer: answer, local: local)
        try transport.setRestartRemote(answer.transport)
        session.withLock { s in (s.local, s.remote) = (offer, answer) }
    }

    /// The peer's answer to a restart this side began on the transport itself, given as ICE
    /// credentials and candidates only (a WHIP/WHEP PATCH, RFC 9725 §4.4): the certificate, the
    /// DTLS role and the media stay those of the session.
    public func acceptRestart(ufrag: String, password: String, candidates: [String]) throws {
        guard var remote = session.withLock({ $0.remote?.transport }) else { throw NegotiationError("no session to restart") }
        (remote.ufrag, remote.password, remote.candidates) = (ufrag, password, candidates)
        try transport.setRestartRemote(remote)
    }

    /// Answers a later offer of the peer in this session. New ICE credentials in it are an ICE
    /// restart: a new agent answers them, and ours (a restart of our own under way) gives way.
    /// The media and the DTLS role stay as they are.
    public func answerRestart(_ offer: JSEPDescription, servers: [ICEServer]? = nil) throws -> (answer: JSEPDescription, restartsICE: Bool) {
        let (previous, role) = session.withLock { s in (s, s.role) }
        guard let mine = previous.local, let theirs = previous.remote, let role else { throw NegotiationError("no session to renegotiate") }
        var transportInAnswer = localTransport
        let restartsICE = offer.transport.ufrag != theirs.transport.ufrag || offer.transport.password != theirs.transport.password
        if restartsICE {
            session.withLock { $0.restartOffer = nil }
            let credentials = try transport.restartICE(controlling: false, servers: servers)
            try transport.setRestartRemote(offer.transport)
            (transportInAnswer.ufrag, transportInAnswer.password) = credentials
        }
        var (answer, _) = try OfferAnswer.answer(offer, local: local, transport: transportInAnswer)
        answer.transport.setup = role == .client ? .active : .passive
        answer.sessionID = mine.sessionID
        answer.sessionVersion = mine.sessionVersion + 1
        session.withLock { s in (s.local, s.remote) = (answer, offer) }
        return (answer, restartsICE)
    }

    private var fingerprintOfPeer: DTLSFingerprint? { session.withLock { $0.remote?.transport.fingerprint } }

    /// How the encoders are driven in a call: the mode, the video ceiling, and where decisions go.
    public struct Encoding: Sendable {
        public var mode: VideoEncodingMode = .auto
        public var maxVideoBitrate = 2_500_000
        /// False for a viewer's session: pictures are scaled, the camera's mode is the call's.
        public var controlsCameraMode = true
        public var onDecision: (@Sendable (EncodingDecision) -> Void)?
        /// The shared encoder the video comes from, when several peers watch one endpoint.
        var fanout: VideoFanout?
        var audioFanout: AudioFanout?
        /// A call's peer beside viewers: the viewers' shared encoder, taken while one watches.
        var fanoutWhenWatched: VideoFanout?
        public init() {}
    }

    /// Waits for DTLS to key SRTP, then sends and receives until `duration` passes, the peer says
    /// BYE or goes silent, consent is lost, or `stop()`. The tracks, renderers and speaker belong
    /// to the caller and stay open afterwards.
    public func run(_ call: NegotiatedCall, media: Call.Media, encoding: Encoding = Encoding(), duration: Duration?) throws -> (sent: SenderStatistics, received: ReceiverSummary) {
        let waitUntil = MediaTime.now + Self.connectTimeout
        while outcome.withLock({ $0 }) == nil {
            if stopRequested.load(ordering: .relaxed) { throw NegotiationError("stopped before the connection was up") }
            if MediaTime.now >= waitUntil { throw NegotiationError("no connection to the peer within \(Self.connectTimeout) (ICE and DTLS)") }
            // Until the connection settles, stop() or the timeout: each signals.
            settled.wait(for: waitUntil - MediaTime.now)
        }
        if let why = untrusted.withLock({ $0 }) { throw CallSecurityError(description: why) }
        if case .some(.some(let failure)) = outcome.withLock({ $0 }) { throw NegotiationError(failure) }
        let video = call.stream(.video), audio = call.stream(.audio)
        var sending = MediaSenderConfiguration(destinationHost: "0.0.0.0", videoPort: 0)
        sending.payloadTypes = .init(video: video?.codec.payloadType ?? 96, rtx: video?.codec.rtxPayloadType,
                                     audio: audio?.codec.payloadType ?? 111, audioRED: audio?.codec.redPayloadType,
                                     videoRED: video?.codec.ulpfecPayloadType == nil ? nil : video?.codec.redPayloadType, videoFEC: video?.codec.ulpfecPayloadType)
        sending.payloadTypes.videoREDRTX = video?.codec.ulpfecPayloadType == nil ? nil : video?.codec.redRTXPayloadType
        sending.videoFormat = video.flatMap { VideoPayloadFormat(encodingName: $0.codec.name) } ?? .vp8
        sending.h264EncoderDevice = media.h264EncoderDevice
        let tracks = (video: video?.sends == true ? media.videoTrack : nil, audio: audio?.sends == true ? media.audioTrack : nil)
        sending.duration = duration
        sending.ssrcs = (local.videoSSRC, local.rtxSSRC, local.audioSSRC)
        sending.transportSequenceExtensionID = video?.transportSequenceExtensionID
        if let id = video?.midExtensionID ?? audio?.midExtensionID {
            sending.midExtension = (id, video?.mid ?? "1", audio?.mid ?? "0")
        }
        sending.encodingMode = encoding.mode
        sending.controlsCameraMode = encoding.controlsCameraMode
        sending.estimatesFromReports = true
        sending.maxVideoBitrate = encoding.maxVideoBitrate
        sending.videoBitrate = min(sending.videoBitrate, encoding.maxVideoBitrate)
        sending.onDecision = encoding.onDecision
        // The shared encoders are VP8's: a session in another codec encodes its own video.
        sending.videoFanout = sending.videoFormat == .vp8 ? encoding.fanout : nil
        sending.audioFanout = encoding.audioFanout
        sending.videoFanoutWhenWatched = sending.videoFormat == .vp8 ? encoding.fanoutWhenWatched : nil
        let incoming = (video: call.stream(.video).flatMap { $0.receives ? $0 : nil }, audio: call.stream(.audio).flatMap { $0.receives ? $0 : nil })
        var receiving = MediaReceiverConfiguration(
            video: incoming.video.map(\.incomingCodec).map {
                var inbound = SessionConfiguration.Inbound(payloadType: $0.payloadType, rtxPayloadType: $0.rtxPayloadType, feedback: $0.feedback,
                                                           redPayloadType: $0.ulpfecPayloadType == nil ? nil : $0.redPayloadType,
                                                           fecPayloadType: $0.ulpfecPayloadType, redRTXPayloadType: $0.redRTXPayloadType)
                inbound.videoFormat = VideoPayloadFormat(encodingName: $0.name) ?? .vp8
                return inbound
            },
            audio: incoming.audio.map(\.incomingCodec).map { .init(payloadType: $0.payloadType, redPayloadType: $0.redPayloadType) })
        // The peer's last frames get two seconds more; a side that takes no media ends with its sender.
        receiving.duration = duration.map { local.receives ? $0 + .seconds(2) : $0 }
        // Silence of 4 s (reports come every second) is an outage: the round goes on, and media
        // resumes when the path returns (or after an ICE restart). A peer that comes back as a
        // new process sends a new offer, which starts a new round.
        receiving.idleTimeout = .seconds(4)
        receiving.silenceEndsSession = false
        receiving.videoRenderers = media.renderers
        receiving.recorder = media.recording?.received
        sending.recorder = media.recording?.sent
        receiving.transportSequenceExtensionID = video?.transportSequenceExtensionID ?? audio?.transportSequenceExtensionID
        receiving.audioPlayout = media.audioPlayout
        receiving.measuresLatency = media.measuresLatency
        // One media loop and one session core for both directions: what the transport receives
        // is queued to the loop from libnice's thread.
        let loop = MediaLoop(group: loopGroup)
        let sender = try MediaSender(configuration: sending, transport: transport, tracks: tracks, loop: loop)
        let receiver = try MediaReceiver(configuration: receiving, transport: transport, loop: loop)
        parts.withLock { $0 = (sender, receiver) }
        let capture = RTCPCapture()
        transport.startDelivering { packet in
            if packet.isRTCP { capture?.keep(packet.bytes) }
            loop.deliver(packet)
        }
        defer {
            transport.startDelivering { _ in }
            parts.withLock { $0 = (nil, nil) }
        }
        if stopRequested.load(ordering: .relaxed) { stop() }
        defer { endData() }
        let sent = try MediaSession(transport: transport, loop: loop, sender: sender, receiver: receiver).run()
        var received = receiver.finish()
        if let failure = lateFailure.withLock({ $0 }) { received.endReason = failure }
        return (try sent!.get(), received)
    }

    /// Statistics of the running call, or nil before media starts and after it ends.
    public func statistics() -> (sent: SenderStatistics, received: ReceiverSummary)? {
        guard case let (sender?, receiver?) = parts.withLock({ $0 }) else { return nil }
        return (sender.snapshot(), receiver.snapshot())
    }

    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        settled.signal()  // a run() still waiting for the connection stops waiting
        let (sender, receiver) = parts.withLock { $0 }
        sender?.stop()
        receiver?.stop()
    }
}
