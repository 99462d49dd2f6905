import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization

/// What a receiver takes (a call's negotiated streams, or an SDP file's) and where the media goes.
public struct MediaReceiverConfiguration: Sendable {
    /// The streams received: payload types and the RTCP feedback they allow.
    public var video: SessionConfiguration.Inbound?
    public var audio: SessionConfiguration.Inbound?
    /// The file peer: when the streams come from an SDP file rather than a call, the file, whose
    /// ports the receiver listens on (with its SDES keys) and whose codecs it checks.
    public var file: SessionDescriptionFile?
    public var listenHost = "0.0.0.0"
    /// The key this side protects its RTCP with, when it is not the stream's (a call: our own key).
    public var srtpSendKey: [UInt8]?
    /// Files to write (made into a renderer and a playout device the receiver owns and closes).
    public var videoOutput: String?
    public var audioOutput: String?
    /// A call's renderers and speaker, which outlive one media session (the call closes them).
    public var videoRenderers: [any VideoRenderer] = []
    /// Records what is received as it was encoded (a call's recording); the call closes it.
    public var recorder: MediaRecorder?
    public var audioPlayout: (any AudioDevice)?
    /// The RFC 8285 ID of the transport-wide sequence number on the video port: when set, every
    /// packet's arrival is reported back in transport-cc feedback every 50 ms (the sender's
    /// bandwidth estimator reads it).
    public var transportSequenceExtensionID: UInt8?
    public var duration: Duration?
    /// After this long without any packet, RTP or RTCP, once media has flowed, the peer is
    /// silent: RTCP arrives every second even from a muted sender. `callend receive` then stops
    /// (the sender went away); a call counts an outage and waits for the path to return.
    public var idleTimeout: Duration = .seconds(3)
    public var silenceEndsSession = true
    /// Reads the synthetic sources' capture stamps in the pictures and timing marks in the tone
    /// (a bench's or a test's probe): glass-to-glass latency and the first frame numbers in the
    /// summary. Off, no picture or sound is scanned on the receive path.
    public var measuresLatency = false

    /// A call's streams (the transport is the call's).
    public init(video: SessionConfiguration.Inbound?, audio: SessionConfiguration.Inbound?) {
        (self.video, self.audio) = (video, audio)
    }

    /// The streams an SDP file describes (`callend receive`, GStreamer or ffmpeg as the sender).
    public init(description: SessionDescriptionFile) {
        file = description
        video = description.streams.first { $0.kind == .video }.map {
            var inbound = SessionConfiguration.Inbound(payloadType: $0.payloadType, rtxPayloadType: $0.rtxPayloadType, feedback: $0.feedback)
            inbound.videoFormat = VideoPayloadFormat(encodingName: $0.encodingName) ?? .vp8
            return inbound
        }
        audio = description.streams.first { $0.kind == .audio }.map { .init(payloadType: $0.payloadType) }
    }
}

public struct ReceiverSummary: Sendable, CustomStringConvertible {
    public var videoPackets = 0
    public var videoPacketsLost: Int64 = 0
    public var retransmissionsReceived = 0
    /// Video FEC (ULPFEC in RED): media packets that came in RED, FEC packets received, and
    /// lost media packets rebuilt from them.
    public var videoPacketsInRED = 0, videoFECPackets = 0, videoRecoveredByFEC = 0
    public var framesDecoded = 0
    /// Frames given up on: incomplete ones the jitter buffer skipped, and complete ones skipped
    /// because decoding had fallen behind.
    public var framesDropped = 0
    /// Pictures decoded but not rendered because a newer one was already waiting (a renderer
    /// slower than the frame rate).
    public var picturesNotRendered = 0
    public var decodeErrors = 0
    public var keyframes = 0
    public var nacksSent = 0
    public var pliSent = 0
    public var audioPackets = 0
    public var audioDecoded = 0
    public var audioRecoveredByFEC = 0
    /// Audio packets lost on the way but rebuilt from the next packets' RED blocks (decoded
    /// with the rest: among `audioDecoded`).
    public var audioRecoveredByRED = 0
    /// Audio packets that came in RED (the peer sends redundancy).
    public var audioPacketsInRED = 0
    public var audioConcealed = 0
    public var videoJitterMs = 0.0
    public var elapsed: Duration = .zero
    public var firstFrameNumbers: [Int] = []
    /// Capture-to-decode time of frames carrying the test pattern's capture stamp, in ms (in
    /// fixed memory, however long the call).
    public var videoLatencyMs = PercentileSketch()
    /// Capture-to-playout time of the sender's audio timing marks, in ms.
    public var audioLatencyMs = PercentileSketch()
    /// The receiver's hops of each stream's latency (`LatencyBudget`: jitter buffer, decode,
    /// playout; the network's is half the round trip, added where the round trip is known).
    public var videoBudget = LatencyBudget(), audioBudget = LatencyBudget()
    /// When the first frame was decoded (since the receiver started).
    public var firstFrameAt: Duration?
    /// Why receiving ended early (bye, silence), empty when it ran its course.
    public var endReason = ""
    /// The session ended on the peer's RTCP BYE (`endReason` words it for a person).
    public var endedByPeerBye = false
    /// Video delay minus audio delay (capture to playout, by the sender reports), ms: positive
    /// when the picture comes after the sound. Nil until both streams have sender reports.
    public var avOffsetMs: Double?
    /// What the peer says of its video source (RTCP SDES NOTE: "camera lost"), while it says it.
    public var peerVideoNote: String?
    /// Pictures that came 300 ms or more after the one before (a viewer sees the video stop),
    /// and the longest such wait.
    public var freezes = 0
    public var longestFreeze: Duration = .zero
    /// The lengths of the last freezes (64 at most), newest last: the stats line's longest of
    /// its second comes from them.
    public var recentFreezes: [Duration] = []
    /// When the last picture was decoded.
    public var lastFrameAt: Duration?
    /// What lip sync holds back to cancel that offset: the picture, the sound (ms).
    public var lipSyncHoldMs: (video: Double, audio: Double) = (0, 0)
    /// Outages: silences longer than the idle timeout (a call goes on through them).
    public var outages = 0
    /// Since when the peer has been silent, when it is now (the time of its last packet).
    public var silentSince: Duration?
    /// Size of the last decoded picture.
    public var videoWidth = 0
    public var videoHeight = 0

    public var description: String {
        "received \(elapsed.inSeconds.fixed(1)) s: video \(videoPackets) packets (\(videoPacketsLost) lost, \(retransmissionsReceived) retransmissions), "
            + "\(framesDecoded) frames decoded (\(keyframes) keyframes, \(framesDropped) dropped, \(decodeErrors) decode errors), "
            + "jitter \(videoJitterMs.fixed(1)) ms; NACKs sent \(nacksSent), PLIs \(pliSent); audio \(audioPackets) packets, \(audioDecoded) decoded "
            + "(\(audioRecoveredByRED) rebuilt from RED), \(audioRecoveredByFEC) from FEC, \(audioConcealed) concealed"
    }
}

/// Receives the streams an SDP describes (each on its own port with RTCP multiplexed, or a
/// call's bundled transport). This is the receiving shell: the session core on the media loop
/// reorders and reassembles video, asks for lost packets and keyframes, and reports; here the
/// frames it completes are decoded and rendered (`VideoDecodeStage`, a thread of its own), audio
/// plays through a jitter buffer with FEC and concealment (the playout thread, as a sound card
/// pulls), Y4M/IVF and WAV files are written, and the session's end is watched for.
public final class MediaReceiver: @unchecked Sendable {  // mutable state is inside `state`; `started` and the streams are immutable
    public let configuration: MediaReceiverConfiguration
    /// Where packets come from: the SDP file's two ports (made here), or a call's transport.
    let transport: any PacketTransport
    let ssrc = UInt32.random(in: 1...UInt32.max)
    /// False when a call owns the transport and routes packets here itself.
    let ownsTransport: Bool
    let clock = MonotonicClock()
    let started: MediaTime
    let stopping = Atomic<Bool>(false)
    let loop: MediaLoop

    struct State {
        var audioBuffer = AudioJitterBuffer(minimumDelay: MediaReceiver.audioBaseDelay)
        var audioDecoder: OpusDecoder?
        var summary = ReceiverSummary()
        /// A decode error: a keyframe is needed (told to the core on the loop's next turn).
        var needKeyframe = false
        var saidBye = false
        var audioLatency = AudioLatencyMeter()
        /// What the core knows of the streams, as of the loop's last turn.
        var videoLost: Int64 = 0
        var videoJitter = 0.0
        var framesDroppedByJitterBuffer = 0
        var avOffset: Double?
        var peerVideoNote: String?
        var holds: (video: Duration, audio: Duration) = (.zero, .zero)
        var counters = RTPSessionCore.Counters()
    }
    /// The audio jitter buffer's own least delay, before lip sync adds to it: none beyond what
    /// the jitter it measures asks for (twice the jitter and one packet).
    static let audioBaseDelay = Duration.zero
    let state: Mutex<State>
    /// Decoding and rendering, off the loop and the lock.
    private let videoStage: VideoDecodeStage
    let renderers: [any VideoRenderer]
    let speaker: (any AudioDevice)?
    /// What the receiver made from output paths itself, and so closes itself.
    let ownedRenderers: [any VideoRenderer]
    let ownedPlayout: (any AudioDevice)?

    public convenience init(configuration: MediaReceiverConfiguration, transport: (any PacketTransport)? = nil) throws {
        try self.init(configuration: configuration, transport: transport, loop: MediaLoop())
    }

    /// `loop`: the media loop the session runs on (a call's, shared with its sender).
    init(configuration: MediaReceiverConfiguration, transport: (any PacketTransport)?, loop: MediaLoop) throws {
        self.configuration = configuration
        self.loop = loop
        started = loop.clock.now
        let streams = configuration.file?.streams ?? []
        let videoStream = streams.first { $0.kind == .video }, audioStream = streams.first { $0.kind == .audio }
        if let v = videoStream, VideoPayloadFormat(encodingName: v.encodingName) == nil {
            throw ParseError("SDP", "video is \(v.encodingName); callend receives VP8 and H264")
        }
        if configuration.video?.videoFormat == .h264, configuration.videoOutput?.hasSuffix(".ivf") == true {
            throw ConfigurationError("the video is H.264 and an .ivf file holds VP8 here: write the pictures to a .y4m file")
        }
        if let a = audioStream, a.encodingName.lowercased() != "opus" {
            throw ParseError("SDP", "audio is \(a.encodingName); callend receives Opus")
        }
        ownsTransport = transport == nil
        if let transport {
            self.transport = transport
        } else {
            guard configuration.file != nil else { throw ParseError("receiver", "no transport and no SDP file to listen by") }
            // The SDP file's ports; RTCP goes back to whoever sends, under the stream's own key.
            var sockets: [MediaKind: UDPSocket] = [:], keys: [MediaKind: UDPPairTransport.Keys] = [:]
            for (kind, stream) in [(MediaKind.video, videoStream), (.audio, audioStream)] {
                guard let stream else { continue }
                sockets[kind] = try UDPSocket(bindHost: configuration.listenHost, port: stream.port)
                if let crypto = stream.crypto {
                    keys[kind] = .init(profile: crypto.profile, send: configuration.srtpSendKey ?? crypto.keyMaterial, receive: crypto.keyMaterial)
                }
            }
            self.transport = try UDPPairTransport(sockets: sockets, keys: keys)
        }
        var initial = State()
        initial.audioDecoder = try OpusDecoder(channels: 2)
        state = Mutex(initial)
        ownedRenderers = configuration.videoOutput.map { [VideoRenderers.forPath($0)] } ?? []
        // A call's speaker, when given, is where audio goes; an output path is then not opened.
        ownedPlayout = configuration.audioPlayout != nil ? nil : try configuration.audioOutput.map { try SyntheticAudioDevice(source: .silence, outputPath: $0) }
        renderers = configuration.videoRenderers + ownedRenderers + (configuration.recorder.map { [$0] } ?? [])
        speaker = configuration.audioPlayout ?? ownedPlayout
        videoStage = try VideoDecodeStage(renderers: renderers, clock: clock, format: configuration.video?.videoFormat ?? .vp8)
        videoStage.start { [weak self] outcome in self?.decoded(outcome) }
    }

    deinit { videoStage.stop(wait: false) }

    public func stop() {
        stopping.store(true, ordering: .relaxed)
        loop.wake()
    }

    /// Time since the receiver was made: what the summary's times count from.
    var elapsed: Duration { clock.now - started }

    /// Receives until the duration passes, the peer says BYE or goes silent, or `stop()`, on a
    /// media loop of the receiver's own; returns the summary.
    public func run() throws -> ReceiverSummary {
        if ownsTransport { transport.startDelivering { [loop] packet in loop.deliver(packet) } }
        _ = try MediaSession(transport: transport, loop: loop, sender: nil, receiver: self).run()
        if ownsTransport { transport.close() }
        return finish()
    }

    /// Starts audio playout (the session does, before its loop).
    func start() throws {
        if configuration.audio != nil {
            try speaker?.startPlayout()
            playout.enter()
            startThread(named: "audio-playout") { [self] in
                playAudio()
                playout.leave()
            }
        }
    }

    /// One turn of the media loop: the end of the session (duration, BYE, silence) and outages.
    /// Nil when receiving is over; else how long the loop may wait before the idle timeout or
    /// the duration needs another look.
    func step(now: MediaTime, lastArrival: MediaTime?) -> Duration? {
        guard !stopping.load(ordering: .relaxed) else { return nil }
        let elapsed = now - started
        if let limit = configuration.duration, elapsed >= limit { return nil }
        let idle = lastArrival.map { now - $0 > configuration.idleTimeout } ?? false
        let over = state.withLock { s -> Bool in
            if s.saidBye || idle && configuration.silenceEndsSession {
                s.summary.endReason = s.saidBye ? "peer said bye" : "peer silent for \(configuration.idleTimeout)"
                s.summary.endedByPeerBye = s.saidBye
                return true
            }
            if idle, s.summary.silentSince == nil, let lastArrival {
                s.summary.silentSince = lastArrival - started
                s.summary.outages += 1
            } else if !idle {
                s.summary.silentSince = nil
            }
            return false
        }
        if over { return nil }
        // Until the silence would pass the idle timeout, or the duration ends (a packet that
        // comes first starts the next turn anyway; during an outage, the core's reports do).
        var wait: Duration = .seconds(1)
        if !idle, let lastArrival { wait = min(wait, lastArrival + configuration.idleTimeout - now + .milliseconds(1)) }
        if let limit = configuration.duration { wait = min(wait, limit - elapsed) }
        return max(wait, .zero)
    }

    /// After the loop: playout and decoding end, owned outputs are closed; the summary.
    func finish() -> ReceiverSummary {
        stop()
        playout.wait()
        videoStage.stop()
        for renderer in ownedRenderers { renderer.finish() }
        ownedPlayout?.stopPlayout()
        return state.withLock { summarize($0) }
    }

    private let playout = DispatchGroup()

    /// The statistics so far, while receiving.
    public func snapshot() -> ReceiverSummary { state.withLock { summarize($0) } }

    private func summarize(_ s: State) -> ReceiverSummary {
        var summary = s.summary
        summary.elapsed = elapsed
        summary.videoPackets = s.counters.receivedVideoPackets
        summary.audioPackets = s.counters.receivedAudioPackets
        summary.retransmissionsReceived = s.counters.retransmissionsReceived
        summary.videoPacketsInRED = s.counters.receivedVideoInRED
        summary.videoFECPackets = s.counters.fecPacketsReceived
        summary.videoRecoveredByFEC = s.counters.videoRecoveredByFEC
        summary.nacksSent = s.counters.nacksSent
        summary.pliSent = s.counters.pliSent
        summary.videoPacketsLost = s.videoLost
        let stage = videoStage.counts
        summary.framesDropped = s.framesDroppedByJitterBuffer + stage.skipped
        summary.picturesNotRendered = stage.notRendered
        summary.videoJitterMs = s.videoJitter * 1000
        summary.audioRecoveredByFEC = s.audioBuffer.recoveredByFEC
        summary.audioRecoveredByRED = s.counters.audioRecoveredByRED
        summary.audioPacketsInRED = s.counters.receivedAudioInRED
        summary.audioConcealed = s.audioBuffer.concealed
        summary.avOffsetMs = s.avOffset.map { $0 * 1000 }
        summary.peerVideoNote = s.peerVideoNote
        summary.lipSyncHoldMs = (s.holds.video.inSeconds * 1000, s.holds.audio.inSeconds * 1000)
        return summary
    }

    // MARK: From the loop's thread

    /// What the core knows of the streams, after each turn.
    func absorb(_ core: RTPSessionCore.Snapshot) {
        state.withLock { s in
            s.counters = core.counters
            s.videoLost = core.receivedVideoLost
            s.videoJitter = core.receivedVideoJitter
            s.framesDroppedByJitterBuffer = core.framesDroppedByJitterBuffer
            s.avOffset = core.avOffset
            s.peerVideoNote = core.peerVideoNote
        }
    }

    /// Complete frames the core's jitter buffer released.
    func decode(_ frames: [VideoJitterBuffer.Frame]) { videoStage.submit(frames) }

    /// An audio packet for the playout's jitter buffer.
    func play(_ packet: RTPPacket, arrival: MediaTime) {
        let samples = OpusDecoder.samplesPerChannel(in: packet.payload)
        configuration.recorder?.audio(packet.payload, stamp: .rtp(packet.timestamp, clockRate: AudioFrame.sampleRate))
        state.withLock { $0.audioBuffer.insert(packet, arrival: arrival - started, samples: samples) }
    }

    /// Lip sync's holds: the picture waits in the decode stage, the sound in its jitter buffer.
    func hold(video: Duration, audio: Duration) {
        state.withLock { s in
            s.holds = (video, audio)
            s.audioBuffer.setExtraDelay(audio, base: Self.audioBaseDelay)
        }
        videoStage.holdTime = video
    }

    func peerSaidBye() { state.withLock { $0.saidBye = true } }

    /// Whether decoding needs a keyframe (a decode error, or frames skipped without one); clears it.
    func takeKeyframeRequest() -> Bool {
        let stage = videoStage.takeKeyframeRequest()
        let recorder = configuration.recorder?.takeKeyframeRequest() == true
        let decoder = state.withLock { s in defer { s.needKeyframe = false }; return s.needKeyframe }
        return stage || decoder || recorder
    }
}
