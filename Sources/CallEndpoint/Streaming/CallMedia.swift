import Dispatch
import Foundation
import Platform
import RTPTransport
import Synchronization

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

    /// How long ICE and DTLS may take once both descriptions are known (RFC 8445 checks take
    /// seconds at worst through TURN; a peer that never answers must not hold the round for ever).
    public static let connectTimeout: Duration = .seconds(30)

    public init(media: Call.Media, ice: ICEAgent.Configuration, certificate: DTLSCertificate,
                onEvent: @escaping @Sendable (BundleTransport.Event) -> Void) throws {
        local = LocalMedia(sendsVideo: media.videoTrack != nil, sendsAudio: media.audioTrack != nil)
        final class Outcome: @unchecked Sendable {  // set once, right after init
            weak var media: CallMedia?
        }
        let me = Outcome()
        transport = try BundleTransport(configuration: .init(ice: ice, certificate: certificate)) { event in
            switch event {
            case .secured: me.media?.settle(nil)
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

    deinit { transport.close() }

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

    public func offer() -> JSEPDescription { OfferAnswer.offer(local, transport: localTransport) }

    /// Answers the peer's offer and points the transport at the peer.
    public func answer(_ offer: JSEPDescription) throws -> (JSEPDescription, NegotiatedCall) {
        let (answer, call) = try OfferAnswer.answer(offer, local: local, transport: localTransport)
        try transport.setRemote(call.remoteTransport, role: call.dtlsRole)
        return (answer, call)
    }

    /// Takes the peer's answer to our offer and points the transport at the peer.
    public func accept(_ answer: JSEPDescription, to offer: JSEPDescription) throws -> NegotiatedCall {
        let call = try OfferAnswer.negotiate(offer: offer, answer: answer, local: local)
        try transport.setRemote(call.remoteTransport, role: call.dtlsRole)
        return call
    }

    /// How the encoders are driven in a call: the mode, the video ceiling, and where decisions go.
    public struct Encoding: Sendable {
        public var mode: VideoEncodingMode = .auto
        public var maxVideoBitrate = 2_500_000
        public var onDecision: (@Sendable (EncodingDecision) -> Void)?
        public init() {}
    }

    /// Waits for DTLS to key SRTP, then sends and receives until `duration` passes, the peer says
    /// BYE or goes silent, consent is lost, or `stop()`. The tracks, renderers and speaker belong
    /// to the caller and stay open afterwards.
    public func run(_ call: NegotiatedCall, media: Call.Media, encoding: Encoding = Encoding(), duration: Duration?) throws -> (sent: SenderStatistics, received: ReceiverSummary) {
        let waitUntil = DispatchTime.now() + Self.connectTimeout.secondsDouble
        while outcome.withLock({ $0 }) == nil {
            if stopRequested.load(ordering: .relaxed) { throw NegotiationError("stopped before the connection was up") }
            if DispatchTime.now() >= waitUntil { throw NegotiationError("no connection to the peer within \(Self.connectTimeout) (ICE and DTLS)") }
            _ = settled.wait(timeout: .now() + 0.1)
        }
        if let why = untrusted.withLock({ $0 }) { throw CallSecurityError(description: why) }
        if case .some(.some(let failure)) = outcome.withLock({ $0 }) { throw NegotiationError(failure) }
        let video = call.stream(.video), audio = call.stream(.audio)
        var sending = MediaSenderConfiguration(destinationHost: "0.0.0.0", videoPort: 0)
        sending.payloadTypes = .init(video: video?.codec.payloadType ?? 96, rtx: video?.codec.rtxPayloadType,
                                     audio: audio?.codec.payloadType ?? 111)
        let tracks = (video: video?.sends == true ? media.videoTrack : nil, audio: audio?.sends == true ? media.audioTrack : nil)
        sending.duration = duration
        sending.ssrcs = (local.videoSSRC, local.rtxSSRC, local.audioSSRC)
        sending.transportSequenceExtensionID = video?.transportSequenceExtensionID
        if let id = video?.midExtensionID ?? audio?.midExtensionID {
            sending.midExtension = (id, video?.mid ?? "1", audio?.mid ?? "0")
        }
        sending.encodingMode = encoding.mode
        sending.maxVideoBitrate = encoding.maxVideoBitrate
        sending.videoBitrate = min(sending.videoBitrate, encoding.maxVideoBitrate)
        sending.onDecision = encoding.onDecision
        let streams: [StreamDescription] = call.streams.filter(\.receives).map { s in
            StreamDescription(kind: s.kind == .video ? .video : .audio, port: 9, payloadType: s.codec.payloadType, encodingName: s.codec.name,
                              clockRate: s.codec.clockRate, channels: s.codec.channels, feedback: s.codec.feedback, rtcpMux: true,
                              ssrc: s.remoteSSRC, rtxPayloadType: s.codec.rtxPayloadType)
        }
        var receiving = MediaReceiverConfiguration(description: SessionDescriptionFile(connectionAddress: "0.0.0.0", streams: streams))
        receiving.duration = duration.map { $0 + .seconds(2) }
        // A peer that vanishes is noticed from RTCP silence within 4 s (reports come every second).
        receiving.idleTimeout = .seconds(4)
        receiving.videoRenderers = media.renderers
        receiving.transportSequenceExtensionID = video?.transportSequenceExtensionID ?? audio?.transportSequenceExtensionID
        receiving.audioPlayout = media.audioPlayout
        let sender = try MediaSender(configuration: sending, transport: transport, tracks: tracks)
        let receiver = try MediaReceiver(configuration: receiving, transport: transport)
        parts.withLock { $0 = (sender, receiver) }
        // RTP to the receiver, RTCP to both (SR and BYE concern the receiver; RR, NACK, PLI,
        // FIR and transport-cc feedback the sender).
        transport.startDelivering { packet in
            if packet.isRTCP { sender.handleRTCP(packet.bytes) }
            receiver.receive(packet)
        }
        if stopRequested.load(ordering: .relaxed) { stop() }
        let sent = Mutex<Result<SenderStatistics, any Error>?>(nil)
        let senderDone = DispatchSemaphore(value: 0)
        startThread(named: "media-sender") {
            let result = Result { try sender.run() }
            sent.withLock { $0 = result }
            senderDone.signal()
        }
        var received = try receiver.run()
        sender.stop()
        senderDone.wait()
        transport.startDelivering { _ in }
        parts.withLock { $0 = (nil, nil) }
        if let failure = lateFailure.withLock({ $0 }) { received.endReason = failure }
        return (try sent.withLock { $0! }.get(), received)
    }

    /// Statistics of the running call, or nil before media starts and after it ends.
    public func statistics() -> (sent: SenderStatistics, received: ReceiverSummary)? {
        guard case let (sender?, receiver?) = parts.withLock({ $0 }) else { return nil }
        return (sender.snapshot(), receiver.snapshot())
    }

    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        let (sender, receiver) = parts.withLock { $0 }
        sender?.stop()
        receiver?.stop()
    }
}
