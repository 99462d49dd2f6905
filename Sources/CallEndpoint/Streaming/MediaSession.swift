import Dispatch
import FoundationEssentials
import Glibc
import MediaCore
import Platform
import RTPTransport
import Synchronization

/// The shell around one `RTPSessionCore`: it runs the core on the media loop's thread, which
/// alone touches it, feeds it what the transport received and what the media threads posted,
/// and carries out its actions: packets to the transport, frames to the decoder, audio to the
/// playout, keyframe requests and estimates to the sender's encoders, holds to the receiver.
/// A call has one with both a sender and a receiver; `callend send` and `receive` have one with
/// either.
final class MediaSession {
    let transport: any PacketTransport
    let loop: MediaLoop
    let sender: MediaSender?
    let receiver: MediaReceiver?
    /// The core, where the loop's thread alone touches it, in place: a struct in a class property,
    /// or one a closure captures, is copied (everything in it retained) on some reads; the step
    /// takes it `inout` from here.
    private let core: UnsafeMutablePointer<RTPSessionCore>
    private var started = false
    private var sent: Result<SenderStatistics, any Error>?
    private var deadline = MediaTime.zero
    private var sendErrors = 0

    init(transport: any PacketTransport, loop: MediaLoop, sender: MediaSender?, receiver: MediaReceiver?) {
        self.transport = transport
        self.loop = loop
        self.sender = sender
        self.receiver = receiver
        core = .allocate(capacity: 1)
        core.initialize(to: RTPSessionCore(configuration: Self.configuration(sender: sender, receiver: receiver, overhead: transport.overhead)))
    }

    deinit {
        core.deinitialize(count: 1)
        core.deallocate()
    }

    static func configuration(sender: MediaSender?, receiver: MediaReceiver?, overhead: Int) -> SessionConfiguration {
        // The wall clock (NTP) at the media clock's origin, for sender reports.
        let ntpAtZero = NTPTime.timestamp(unixSeconds: WallClock.unixSeconds) &- SessionConfiguration.ntpUnits(MonotonicClock().now)
        var c = SessionConfiguration(cname: sender?.cname ?? "callend-receiver", receiverSSRC: receiver?.ssrc ?? UInt32.random(in: 1...UInt32.max),
                                     ntpAtZero: ntpAtZero)
        c.transportOverhead = overhead
        if let sender {
            let s = sender.configuration
            if sender.videoTrack != nil {
                c.video = .init(ssrc: sender.videoSSRC, payloadType: s.payloadTypes.video, mid: s.midExtension?.video,
                                redPayloadType: s.payloadTypes.videoRED, fecPayloadType: s.payloadTypes.videoFEC)
                c.video?.videoFormat = s.videoFormat
                c.video?.redRTXPayloadType = s.payloadTypes.videoREDRTX
                if let rtx = s.payloadTypes.rtx { c.rtx = (sender.rtxSSRC, rtx) }
            }
            if sender.audioTrack != nil {
                c.audio = .init(ssrc: sender.audioSSRC, payloadType: s.payloadTypes.audio, mid: s.midExtension?.audio, redPayloadType: s.payloadTypes.audioRED)
            }
            c.midExtensionID = s.midExtension?.id
            c.transportSequenceExtensionID = s.transportSequenceExtensionID
            c.fixedPacingRate = max(s.videoBitrate, s.maxVideoBitrate) * 3
            if s.encodingMode == .auto && (s.transportSequenceExtensionID != nil || s.estimatesFromReports) {
                var congestion = BandwidthEstimator.Configuration()
                congestion.startBitrate = min(800_000, s.maxVideoBitrate)
                congestion.maxBitrate = s.maxVideoBitrate + 64_000
                c.congestion = congestion
            }
        }
        if let receiver {
            c.receivedVideo = receiver.configuration.video
            c.receivedAudio = receiver.configuration.audio
            c.transportSequenceExtensionID = c.transportSequenceExtensionID ?? receiver.configuration.transportSequenceExtensionID
        }
        return c
    }

    /// Runs until the receiver is done (or, without one, the sender): the sender finishes first
    /// when its sources end, and its BYE goes while receiving goes on. Returns the sender's result.
    /// In a group, the group's thread runs the steps while this one waits.
    func run() throws -> Result<SenderStatistics, any Error>? {
        guard !started else { return nil }
        started = true
        sender?.start()
        try receiver?.start()
        deadline = loop.clock.now
        if let group = loop.group {
            group.run(loop) { [self] inputs in step(inputs) }
        } else {
            var wait: Duration = .zero
            while let next = step(loop.take(waiting: wait)) { wait = next }
        }
        if let sender, sent == nil {
            sent = Result { try sender.finish() }
            perform(core.pointee.goodbye())
        }
        return sent
    }

    /// One turn of the loop: what came, then what is due. Returns how long the loop may wait for
    /// more, or nil when the session has ended.
    private func step(_ inputs: [MediaLoop.Input]) -> Duration? { turn(inputs, &core.pointee) }

    /// The step with the core as an `inout` argument: exclusive, so that reading it (`snapshot`,
    /// `nextDeadline`) borrows it in place; read through the pointer, each read copied it.
    private func turn(_ inputs: [MediaLoop.Input], _ core: inout RTPSessionCore) -> Duration? {
        // Each input at the moment it is handled, and what it released sent at once: a packet
        // is stamped for transport-cc with the time it really leaves, not the time the batch
        // it came in began (the delay detector reads the difference as queueing).
        for input in inputs {
            switch input {
            case .packet(let packet, let queuedAt):
                // When the kernel stamped the datagram, when known, not when this thread got to it.
                perform(core.handle(.datagram(bytes: packet.bytes, isRTCP: packet.isRTCP, kind: packet.kind, arrival: queuedAt - packet.age),
                                            at: loop.clock.now))
            case .event(let event):
                perform(core.handle(event, at: loop.clock.now))
            case .wake:
                break
            }
        }
        var now = loop.clock.now
        if receiver?.takeKeyframeRequest() == true { perform(core.handle(.keyframeWanted, at: now)) }
        if now >= deadline || inputs.isEmpty { perform(core.handle(.tick, at: now)) }
        now = loop.clock.now
        deadline = core.nextDeadline(after: now)
        let snapshot = core.snapshot
        sender?.absorb(snapshot, pacerQueueDelay: core.pacerQueueDelay(at: now), sendErrors: sendErrors)
        receiver?.absorb(snapshot)
        var wait = deadline - now
        if let receiver {
            guard let next = receiver.step(now: now, lastArrival: snapshot.lastArrival) else { return nil }
            wait = min(wait, next)
        }
        if let sender, sent == nil, sender.isFinished(pacerEmpty: core.pacerIsEmpty) {
            sent = Result { try sender.finish() }
            perform(core.goodbye())
            if receiver == nil { return nil }
        }
        return max(wait, .zero)
    }

    private func perform(_ actions: [SessionAction]) {
        for action in actions {
            switch action {
            case .send(let bytes, let isRTCP, let kind):
                let ok = isRTCP ? transport.sendRTCP(bytes, kind: kind) : transport.sendRTP(bytes, kind: kind)
                // A network that is down for a while must not end the session: counted.
                if !ok && !isRTCP { sendErrors += 1 }
            case .decode(let frames): receiver?.decode(frames)
            case .playAudio(let packet, let arrival): receiver?.play(packet, arrival: arrival)
            case .keyframeNeeded: sender?.keyframeNeeded()
            case .estimate(let bitrate, let loss, let cause): sender?.estimated(bitrate: bitrate, lossFraction: loss, cause: cause)
            case .videoProtection(let rate): sender?.protected(rate)
            case .holds(let video, let audio): receiver?.hold(video: video, audio: audio)
            case .peerSaidBye: receiver?.peerSaidBye()
            }
        }
    }
}
